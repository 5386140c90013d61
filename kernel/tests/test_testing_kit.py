"""The plugin-author kit's own parts, with the kernel alone: actions from schemas, polling, the
env contract in-process (with no transport in its plugin manager, so the served check is skipped)."""

from __future__ import annotations

import time
import uuid
from typing import Any, Literal

import pytest
from pydantic import BaseModel, Field

from openenv.env import Environment
from openenv.plugins import PluginManager
from openenv.testing import ContractError, EnvContract, eventually, sample_action, wait_until, wait_until_async
from openenv.testing.env_contract import invalid_action_for
from openenv.testing.live import HOST, bind_local
from openenv.types import Action, Observation, State


class Inner(BaseModel):
    x: int = Field(ge=3)


class Rich(Action):
    move: Literal["left", "right"]
    word: str = Field(min_length=4)
    count: int = Field(gt=10)
    ratio: float = Field(ge=0.5)
    flag: bool
    tags: list[str] = Field(min_length=2)
    inner: Inner
    maybe: int | None = None
    kind: Literal["rich"] = "rich"


class Patterned(Action):
    code: str = Field(pattern=r"^[0-9]{6}$")


class Loose(Action):
    model_config = {"extra": "allow"}
    anything: Any = None


def test_sample_action_satisfies_every_constraint_it_knows() -> None:
    value = sample_action(Rich)
    Rich.model_validate(value)
    assert value["move"] == "left" and len(value["word"]) == 4 and value["count"] == 11
    assert value["kind"] == "rich" and "maybe" not in value  # constants kept, optional fields left out


def test_sample_action_names_the_way_out_when_it_cannot_build_one() -> None:
    with pytest.raises(ContractError, match="valid_actions="):
        sample_action(Patterned)


def test_invalid_action_is_derived_or_none_when_everything_is_accepted() -> None:
    bad = invalid_action_for(Rich, sample_action(Rich))
    assert bad is not None and "__openenv_contract_unknown_field__" in bad
    assert invalid_action_for(Loose, {}) is None


def test_wait_until_returns_the_value_or_the_last_falsy_one() -> None:
    calls: list[float] = []

    def soon() -> str:
        calls.append(time.monotonic())
        return "yes" if len(calls) >= 3 else ""

    assert wait_until(soon, timeout_s=5) == "yes"
    assert wait_until(lambda: 0, timeout_s=0) == 0  # called once even with no time at all
    started = time.monotonic()
    assert wait_until(lambda: None, timeout_s=0.1) is None
    assert 0.1 <= time.monotonic() - started < 2


async def test_async_polling_and_eventually() -> None:
    calls: list[int] = []

    def third_call() -> bool:
        calls.append(1)
        return len(calls) > 2

    assert await wait_until_async(third_call, timeout_s=5) is True
    with pytest.raises(AssertionError, match=r"the counter did not hold within 0\.05s"):
        await eventually(lambda: False, timeout_s=0.05, what="the counter")


def test_test_servers_bind_to_loopback_only() -> None:
    sock = bind_local()
    try:
        assert sock.getsockname()[0] == HOST == "127.0.0.1" and sock.getsockname()[1] > 0
    finally:
        sock.close()


class Obs(Observation):
    n: int = 0


class Tally(Environment[Rich, Obs, State]):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Obs:
        self._state = State(episode_id=episode_id or "e", step_count=0)
        return Obs(n=seed or 0)

    def step(self, action: Rich, timeout_s: float | None = None, **kwargs: Any) -> Obs:
        self._state.step_count += 1
        return Obs(n=action.count, reward=0.5)

    @property
    def state(self) -> State:
        return self._state


class Rewinds(Tally):
    def step(self, action: Rich, timeout_s: float | None = None, **kwargs: Any) -> Obs:
        self._state.step_count = -1
        return Obs()


def test_env_contract_in_process_with_the_kernel_alone() -> None:
    no_transports = PluginManager(strict=True, entry_points=[])  # what the kernel alone has
    contract = EnvContract(Tally, plugin_manager=no_transports)
    ran = contract.run()
    assert ran == ["check_reset", "check_seeding", "check_step", "check_invalid_action", "check_close",
                   "check_concurrent_sessions"]
    assert contract.skipped == ["check_snapshot", "check_served"]  # no snapshots; no client transport


def test_env_contract_catches_a_step_count_going_down() -> None:
    with pytest.raises(ContractError, match=r"\[env Rewinds\] check_step: state.step_count went down"):
        EnvContract(Rewinds, served=False).run()


def test_every_public_name_of_the_kit_is_documented() -> None:
    """Public means documented: each name in ``openenv.testing.__all__`` is in the package docstring
    (what only this repository's tests need belongs in tests/, internals in private modules)."""
    import re

    import openenv.testing as kit

    doc = kit.__doc__ or ""
    undocumented = [name for name in kit.__all__ if not re.search(rf"``{re.escape(name)}\b", doc)]
    assert not undocumented, f"document these in openenv/testing/__init__.py, or make them private: {undocumented}"
