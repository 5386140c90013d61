"""The session manager's own rules: connections and activity, the mode rule, step before reset."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from openenv.env import Environment
from openenv.errors import ConfigError, ExecutionError, ModeError, RuleViolation, ValidationError
from openenv.modes import Mode, ModePolicy
from openenv.sessions import ResetRequiredError, SessionManager
from openenv.types import Action, Observation, State


class Act(Action):
    fail: bool = False


class NeedsReset(Environment[Act, Observation, State]):
    """Sync, on the thread pool (``BLOCKING`` stays True)."""

    def reset(self, seed: int | None = None, episode_id: str | None = None) -> Observation:
        self._n = 0
        return Observation()

    def step(self, action: Act) -> Observation:
        if action.fail:
            raise RuntimeError("deliberate")
        self._n += 1
        return Observation(reward=float(self._n))

    @property
    def state(self) -> State:
        return State(step_count=getattr(self, "_n", 0))


class InlineNeedsReset(NeedsReset):
    BLOCKING = False


class AsyncNeedsReset(Environment[Act, Observation, State]):
    async def reset_async(self, seed: int | None = None, episode_id: str | None = None) -> Observation:
        self._board: list[int] | None = []
        return Observation()

    async def step_async(self, action: Act) -> Observation:
        board: Any = getattr(self, "_board", None)
        board.append(1)  # AttributeError on None before reset
        return Observation()

    @property
    def state(self) -> State:
        return State()


# -- connections and activity ---------------------------------------------------------------------


async def test_attach_detach_touch_and_reaping() -> None:
    mgr = SessionManager(InlineNeedsReset, idle_timeout_s=0.05)
    held = await mgr.open(attach=True)
    assert held.connections == 1
    stamp = held.last_activity
    await asyncio.sleep(0.06)
    mgr.touch(held)
    assert held.last_activity > stamp
    await asyncio.sleep(0.06)
    assert await mgr.reap_idle() == []  # a session with a connection is never reaped
    await mgr.detach(held)
    assert held.connections == 0 and not held.closed
    await asyncio.sleep(0.06)
    assert await mgr.reap_idle() == [held.id]
    owned = await mgr.open()
    mgr.attach(owned)
    await mgr.detach(owned, close=True, reason="owner left")
    assert owned.closed and mgr.active == 0


# -- the mode rule --------------------------------------------------------------------------------


def test_mode_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENENV_MODE", raising=False)
    assert Mode.parse(None) is Mode.SIMULATION and Mode.parse("PRODUCTION") is Mode.PRODUCTION
    assert Mode.PRODUCTION == "production"
    monkeypatch.setenv("OPENENV_MODE", "production")
    assert Mode.parse(None) is Mode.PRODUCTION
    monkeypatch.setenv("OPENENV_MODE", "staging")
    with pytest.raises(ConfigError, match=r"Invalid mode: 'staging' \(from OPENENV_MODE\)\. Use one of: "
                                          "simulation, production"):
        Mode.parse(None)


def test_mode_policy_table() -> None:
    sim, prod, strict = ModePolicy("simulation"), ModePolicy("production"), ModePolicy("production", strict=True)
    assert sim.refused(one_shot=True) == sim.refused(one_shot=False) == frozenset()
    assert prod.refused(one_shot=False) == frozenset()
    assert prod.refused(one_shot=True) == {"reset", "step", "state"}
    assert strict.refused(one_shot=False) == {"reset", "step"}
    assert ModePolicy("simulation", strict=True).refused(one_shot=False) == frozenset()  # strict is production's
    with pytest.raises(ModeError, match="Open a session first"):
        prod.check("step", one_shot=True)


async def test_strict_production_refuses_reset_and_step_but_not_tools_or_state() -> None:
    mgr = SessionManager(InlineNeedsReset, mode="production", strict_production=True)
    s = await mgr.open()
    for op in (mgr.reset(s), mgr.step(s, {}), mgr.step_batch(s, [{}])):
        with pytest.raises(ModeError) as info:
            await op
        assert info.value.code == "MODE_ERROR" and "strict_production" in info.value.message
    assert (await mgr.step_many([(s, {})]))[0].code == "MODE_ERROR"
    assert await mgr.state(s) == State().model_dump()
    with pytest.raises(ResetRequiredError):  # a tool call is not refused by mode (it reaches the env)
        await mgr.call_tool(s, {})
    assert s.env.mode == "production"
    await mgr.shutdown()


async def test_one_shot_sessions_in_production() -> None:
    mgr = SessionManager(InlineNeedsReset, mode="production", max_sessions=2)
    with pytest.raises(ModeError):
        mgr.check_mode(None, "reset")  # asked before any env is built
    one_shot = await mgr.open(one_shot=True)
    with pytest.raises(ModeError, match="without a session"):
        await mgr.reset(one_shot)
    held = await mgr.open()
    await mgr.reset(held)
    assert (await mgr.step(held, {})).reward == 1.0
    await mgr.shutdown()


# -- step before reset ----------------------------------------------------------------------------


@pytest.mark.parametrize("env", [NeedsReset, InlineNeedsReset, AsyncNeedsReset])
async def test_step_before_reset_says_reset_first_on_every_runner(env: Any) -> None:
    mgr = SessionManager(env)
    s = await mgr.open()
    with pytest.raises(ResetRequiredError) as info:
        await mgr.step(s, {})
    err = info.value
    assert err.code == "RESET_REQUIRED" and isinstance(err, ExecutionError)
    assert "Call reset first" in err.message and err.data["exception"] in ("AttributeError", "TypeError")
    out, error = await mgr.step_batch(s, [{}])  # a batch reports it the same way
    assert out == [] and isinstance(error, ResetRequiredError)
    await mgr.reset(s)
    await mgr.step(s, {})
    await mgr.shutdown()


async def test_other_failures_before_reset_are_reported_as_they_are() -> None:
    mgr = SessionManager(InlineNeedsReset)
    s = await mgr.open()
    with pytest.raises(ExecutionError) as info:
        await mgr.step(s, {"fail": True})
    assert info.value.code == "EXECUTION_ERROR" and info.value.message == "deliberate"
    await mgr.shutdown()


# -- step kwargs for a factory without a declared class ---------------------------------------------


class Tempered(InlineNeedsReset):
    def step(self, action: Act, temperature: float = 1.0) -> Observation:  # type: ignore[override]
        return Observation(reward=temperature)


def _untyped_factory():  # type: ignore[no-untyped-def]  # no return annotation: the class is unknown
    return Tempered()


async def test_a_factory_without_a_class_gets_the_rule_from_its_first_env() -> None:
    # an untyped factory must name its action type (else the server would refuse every real action)
    with pytest.raises(RuleViolation, match="does not say which env it builds"):
        SessionManager(_untyped_factory, max_sessions=2)
    mgr = SessionManager(_untyped_factory, max_sessions=2, action_type=Action)
    assert mgr.env_class is None
    assert mgr.step_kwargs({"anything": 1}) == {"anything": 1}  # nothing known yet: passed through
    s = await mgr.open()
    assert (await mgr.step(s, {}, {"temperature": "0.5", "timeout_s": 3})).reward == 0.5
    with pytest.raises(ValidationError) as info:
        await mgr.step(s, {}, {"temprature": 1})
    assert info.value.errors[0]["loc"] == ["kwargs", "temprature"]
    await mgr.shutdown()


def test_strict_production_outside_production_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from openenv.context import ServerConfig

    monkeypatch.delenv("OPENENV_MODE", raising=False)
    with pytest.raises(ConfigError, match="strict_production only applies in production mode"):
        ServerConfig(strict_production=True)
    assert ServerConfig(mode="production", strict_production=True).mode is Mode.PRODUCTION
    monkeypatch.setenv("OPENENV_MODE", "production")
    assert ServerConfig(strict_production=True).strict_production
