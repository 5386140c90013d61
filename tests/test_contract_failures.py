"""The contracts of ``openenv.testing`` fail on implementations that break a promise, naming it.

(``test_contracts_installed.py`` shows they pass on the real plugins; this file shows they could
fail there.)
"""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest

import openenv_transport_ws.plugin
from openenv.env import Environment
from openenv.hookspecs import hookimpl
from openenv.interfaces import HandleInfo, LaunchSpec
from openenv.plugins import PluginManager
from openenv.testing import (
    ContractError,
    EchoEnv,
    EnvContract,
    ProviderContract,
    TransportContract,
    live_server,
    make_plugin_module,
    play,
    wait_until,
)
from openenv.types import Action, Observation, State
from openenv_provider_local.local import LocalProvider
from openenv_transport_ws.server import WebSocketTransport


class Move(Action):
    step: int = 1


class Seen(Observation):
    value: int = 0


class GoodEnv(Environment[Move, Seen, State]):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Seen:
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return Seen(value=random.Random(seed).randint(0, 10**9))

    def step(self, action: Move, timeout_s: float | None = None, **kwargs: Any) -> Seen:
        self._state.step_count += action.step
        return Seen(value=self._state.step_count, reward=1.0)

    @property
    def state(self) -> State:
        return self._state


class IgnoresSeed(GoodEnv):
    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Seen:
        super().reset()
        return Seen(value=random.randint(0, 10**9))


class DictState(GoodEnv):
    @property
    def state(self) -> Any:
        return {"episode_id": "x", "step_count": 0}


class Anything(Action):
    model_config = {"extra": "allow"}
    payload: Any = None


class AcceptsAnything(Environment[Anything, Seen, State]):
    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Seen:
        return Seen()

    def step(self, action: Anything, timeout_s: float | None = None, **kwargs: Any) -> Seen:
        return Seen()

    @property
    def state(self) -> State:
        return State(step_count=0)


class SharedState(GoodEnv):
    """Claims concurrency but keeps its state on the class."""

    shared = State(step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Seen:
        SharedState.shared = State(step_count=0)
        return Seen(value=seed or 0)

    def step(self, action: Move, timeout_s: float | None = None, **kwargs: Any) -> Seen:
        SharedState.shared.step_count += 1
        return Seen(value=SharedState.shared.step_count)

    @property
    def state(self) -> State:
        return SharedState.shared


class NaNReward(GoodEnv):
    def step(self, action: Move, timeout_s: float | None = None, **kwargs: Any) -> Seen:
        return Seen.model_construct(value=0, reward=float("nan"), done=False, metadata={})


def test_a_good_env_passes_in_process_and_served() -> None:
    ran = EnvContract(GoodEnv).run()
    assert ran[-1] == "check_served" and "check_concurrent_sessions" in ran


@pytest.mark.parametrize(("env", "check", "says"), [
    (IgnoresSeed, "check_seeding", "different first observations"),
    (DictState, "check_reset", "not a State"),
    (SharedState, "check_concurrent_sessions", "changed another's state"),
    (NaNReward, "check_step", "finite float"),
])
def test_a_broken_env_fails_the_check_that_covers_it(env: Any, check: str, says: str) -> None:
    with pytest.raises(ContractError, match=check) as info:
        EnvContract(env, served=False).run()
    assert says in str(info.value)


def test_an_action_type_that_accepts_anything_fails_invalid_action() -> None:
    with pytest.raises(ContractError, match=r"check_invalid_action.*accepts every invalid action"):
        EnvContract(AcceptsAnything, valid_actions=[{"payload": 1}], served=False).run()


class Misnamed(WebSocketTransport):
    name = "not-ws2"


@hookimpl
def openenv_register_transports(registry: Any) -> None:
    server, client = f"{__name__}:Misnamed", "openenv_transport_ws.client:WebSocketConnector"
    registry.register("ws2", server=server, client=client, description="ws that says another name")


def test_a_transport_missing_from_capabilities_fails_check_served() -> None:
    pm = PluginManager(strict=True, entry_points=[])
    pm.register(openenv_transport_ws.plugin, name="ws")
    pm.register(make_plugin_module(openenv_register_transports), name="ws2")
    assert TransportContract("ws", plugin_manager=pm).run()[-1] == "check_capacity"
    with pytest.raises(ContractError, match=r"\[transport ws2\] check_served: /capabilities lists"):
        TransportContract("ws2", plugin_manager=pm).run()


class HidesHandles(LocalProvider):
    def ps(self, *, all_owners: bool = False) -> list[HandleInfo]:
        return []


class CollectsLiveServers(LocalProvider):
    def gc(self) -> list[HandleInfo]:
        """Reports this owner's live servers as collected (without stopping them)."""
        return LocalProvider.ps(self)


@pytest.mark.usefixtures("no_leftover_processes")
def test_a_provider_whose_ps_hides_its_servers_fails_check_lifecycle(
        cli_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENENV_STATE_DIR", cli_env["OPENENV_STATE_DIR"])
    contract = ProviderContract(HidesHandles(), "echo", spec=LaunchSpec(env="echo"),
                                round_trip=play({"message": "x"}))
    with pytest.raises(ContractError, match=r"check_lifecycle: ps\(\) does not show the started handle"):
        contract.run()


@pytest.mark.usefixtures("no_leftover_processes")
def test_a_provider_whose_gc_reports_live_servers_fails_check_lifecycle(
        cli_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENENV_STATE_DIR", cli_env["OPENENV_STATE_DIR"])
    contract = ProviderContract(CollectsLiveServers(), "echo", spec=LaunchSpec(env="echo"))
    with pytest.raises(ContractError, match=r"gc\(\) collected the live server"):
        contract.run()


def test_live_server_serves_on_loopback_and_always_stops() -> None:
    pm = PluginManager(strict=True, entry_points=[])
    pm.register(openenv_transport_ws.plugin, name="ws")
    EchoEnv.clear()
    with pytest.raises(RuntimeError, match="inside"), live_server(EchoEnv, plugin_manager=pm) as srv:
        assert srv.url.startswith("http://127.0.0.1:")
        thread = srv._thread
        raise RuntimeError("inside")
    assert wait_until(lambda: not thread.is_alive(), timeout_s=5)
