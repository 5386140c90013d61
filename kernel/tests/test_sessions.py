"""The transport-independent session manager: capacity, execution placement, timeouts, reaping."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from pydantic import Field

from openenv.env import Environment
from openenv.errors import CapacityError, ExecutionError, FactoryError, SessionError, ValidationError
from openenv.sessions import SessionManager
from openenv.types import Action, Observation, State


class Msg(Action):
    message: str = Field(min_length=1)


class Echo(Observation):
    echoed: str = ""


class ThreadRecordingEnv(Environment[Msg, Echo, State]):
    """Records the thread of every call, to check thread affinity."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    THREAD_AFFINITY = True
    log: list[tuple[str, int]] = []

    def __init__(self) -> None:
        super().__init__()
        self.log_call("init")
        self._state = State()

    def log_call(self, what: str) -> None:
        type(self).log.append((what, threading.get_ident()))

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kw: Any) -> Echo:
        self.log_call("reset")
        self._state = State(episode_id=episode_id)
        return Echo(echoed="ready", reward=0.0)

    def step(self, action: Msg, timeout_s: float | None = None, **kw: Any) -> Echo:
        self.log_call("step")
        if action.message == "slow":
            time.sleep(0.5)
        if action.message == "boom":
            raise KeyError("x")
        self._state.step_count += 1
        return Echo(echoed=action.message, reward=0.1 * len(action.message))

    @property
    def state(self) -> State:
        self.log_call("state")
        return self._state

    def close(self) -> None:
        self.log_call("close")


class AsyncEnv(Environment[Msg, Echo, State]):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State()

    async def reset_async(self, seed: int | None = None, episode_id: str | None = None) -> Echo:
        self._state = State(episode_id=episode_id)
        return Echo(echoed="ready")

    async def step_async(self, action: Msg, timeout_s: float | None = None, **kw: Any) -> Echo:
        if action.message == "slow":
            await asyncio.sleep(5)
        self._state.step_count += 1
        return Echo(echoed=action.message)

    @property
    def state(self) -> State:
        return self._state


async def test_thread_affine_env_is_created_stepped_and_closed_on_one_thread() -> None:
    ThreadRecordingEnv.log = []
    mgr = SessionManager(ThreadRecordingEnv, max_sessions=2)
    s = await mgr.open()
    await mgr.reset(s, {"episode_id": "e1"})
    await mgr.step(s, {"message": "hi"})
    assert await mgr.state(s) == {"episode_id": "e1", "step_count": 1}
    await mgr.close(s)
    threads = {tid for _, tid in ThreadRecordingEnv.log}
    assert [w for w, _ in ThreadRecordingEnv.log] == ["init", "reset", "step", "state", "close"]
    assert len(threads) == 1 and threading.get_ident() not in threads
    assert mgr.active == 0


async def test_async_env_runs_on_the_event_loop_thread() -> None:
    mgr = SessionManager(AsyncEnv, max_sessions=1)
    assert mgr.is_async
    s = await mgr.open()
    obs = await mgr.reset(s, {"episode_id": "a", "seed": 3, "unknown": 1})  # unknown key dropped
    assert obs.echoed == "ready"
    await mgr.step(s, {"message": "x"})
    assert (await mgr.state(s))["step_count"] == 1
    await mgr.shutdown()


async def test_capacity_is_reserved_before_the_env_is_built() -> None:
    async def opener(mgr: SessionManager) -> Any:
        return await mgr.open()

    mgr = SessionManager(ThreadRecordingEnv, max_sessions=2)
    # Ten concurrent opens on a 2-slot server: exactly two succeed, eight get CapacityError.
    results = await asyncio.gather(*(opener(mgr) for _ in range(10)), return_exceptions=True)
    ok = [r for r in results if not isinstance(r, BaseException)]
    refused = [r for r in results if isinstance(r, CapacityError)]
    assert len(ok) == 2 and len(refused) == 8
    assert refused[0].active_sessions == 2 and refused[0].max_sessions == 2
    assert str(refused[0]) == ("Server error: Server at capacity: 2/2 sessions active. "
                               "Cannot accept new connections. (code: CAPACITY_REACHED)")
    await mgr.shutdown()
    assert mgr.active == 0


async def test_factory_failure_is_reported_and_frees_the_slot() -> None:
    def bad_factory() -> Environment[Any, Any, Any]:
        raise RuntimeError("no GPU")

    mgr = SessionManager(bad_factory, max_sessions=1, action_type=Action)
    with pytest.raises(FactoryError) as info:
        await mgr.open()
    assert info.value.factory_name == "bad_factory"
    assert info.value.message == "Environment factory 'bad_factory' failed to create instance."
    assert "no GPU" in info.value.data["detail"]
    assert mgr.active == 0


async def test_invalid_action_and_env_exception_keep_the_session() -> None:
    mgr = SessionManager(ThreadRecordingEnv, max_sessions=1)
    s = await mgr.open()
    await mgr.reset(s)
    with pytest.raises(ValidationError) as v:
        await mgr.step(s, {"message": ""})
    assert v.value.errors[0]["loc"] == ["message"]
    assert v.value.errors[0]["type"] == "string_too_short"
    with pytest.raises(ExecutionError) as e:
        await mgr.step(s, {"message": "boom"})
    assert e.value.message == "'x'"  # str(KeyError('x')), as upstream
    await mgr.step(s, {"message": "ok"})
    assert (await mgr.state(s))["step_count"] == 1
    await mgr.shutdown()


async def test_reset_arguments_are_validated_on_every_transport() -> None:
    mgr = SessionManager(ThreadRecordingEnv, max_sessions=1)
    s = await mgr.open()
    with pytest.raises(ValidationError) as info:
        await mgr.reset(s, {"seed": -5})
    assert info.value.errors[0]["loc"] == ["seed"]
    assert info.value.errors[0]["type"] == "greater_than_equal"
    with pytest.raises(ValidationError):
        await mgr.reset(s, {"episode_id": "x" * 256})
    await mgr.shutdown()


async def test_step_timeout_for_async_env() -> None:
    mgr = SessionManager(AsyncEnv, max_sessions=1, step_timeout_s=0.05)
    s = await mgr.open()
    await mgr.reset(s)
    with pytest.raises(ExecutionError, match=r"step timed out after 0\.05 seconds"):
        await mgr.step(s, {"message": "slow"})
    await mgr.step(s, {"message": "fine"})  # the session survives
    await mgr.shutdown()


async def test_step_timeout_for_thread_env() -> None:
    mgr = SessionManager(ThreadRecordingEnv, max_sessions=1, step_timeout_s=0.05)
    s = await mgr.open()
    await mgr.reset(s)
    with pytest.raises(ExecutionError, match="timed out"):
        await mgr.step(s, {"message": "slow"})
    await mgr.shutdown()


async def test_idle_reaper_never_touches_connected_sessions() -> None:
    mgr = SessionManager(ThreadRecordingEnv, max_sessions=2, idle_timeout_s=0.01)
    connected = await mgr.open()
    connected.connections = 1
    idle = await mgr.open()
    await asyncio.sleep(0.05)
    reaped = await mgr.reap_idle()
    assert reaped == [idle.id]
    assert mgr.active == 1 and mgr.get(connected.id) is connected
    with pytest.raises(SessionError, match="Unknown session_id"):
        mgr.get(idle.id)
    await mgr.shutdown()


async def test_close_is_deferred_while_attached_and_idempotent() -> None:
    mgr = SessionManager(ThreadRecordingEnv, max_sessions=1)
    s = await mgr.open(transport="http")
    attached = mgr.join(s.id)
    with pytest.raises(SessionError, match="already has an attached WebSocket"):
        mgr.join(s.id)
    assert await mgr.request_close(s) is False
    assert mgr.active == 1
    await mgr.detach(attached)
    assert mgr.active == 0
    await mgr.close(s)  # no-op


async def test_attach_is_refused_to_other_principals() -> None:
    mgr = SessionManager(ThreadRecordingEnv, max_sessions=1)
    s = await mgr.open(owner="token:alice", transport="http")
    with pytest.raises(SessionError, match=f"Unknown session_id: {s.id}"):
        mgr.join(s.id, principal="token:mallory")
    with pytest.raises(SessionError, match="Unknown session_id"):
        mgr.join(s.id)  # no principal at all
    assert mgr.join(s.id, principal="token:alice") is s
    await mgr.shutdown()


class InlineEnv(Environment[Msg, Echo, State]):
    """A sync env that runs inline on the loop (BLOCKING = False)."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    BLOCKING = False

    def __init__(self) -> None:
        super().__init__()
        self._state = State()

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kw: Any) -> Echo:
        return Echo(echoed="ready")

    def step(self, action: Msg, **kw: Any) -> Echo:
        if action.message == "boom":
            raise KeyError("x")
        self._state.step_count += 1
        return Echo(echoed=f"{action.message}#{self._state.step_count}", done=action.message == "end")

    @property
    def state(self) -> State:
        return self._state


@pytest.mark.parametrize("env", [InlineEnv, ThreadRecordingEnv, AsyncEnv], ids=["inline", "thread", "async"])
async def test_step_many_is_independent_per_item_and_ordered_per_session(env: Any) -> None:
    mgr = SessionManager(env, max_sessions=2)
    a, b = await mgr.open(), await mgr.open()
    out = await mgr.step_many([(a, {"message": "x"}), (b, {"message": ""}), (a, {"message": "y"}),
                               (b, {"message": "boom"} if env is not AsyncEnv else {"message": "z"})])
    assert isinstance(out[1], ValidationError) and out[1].errors[0]["loc"] == ["message"]
    assert out[0].echoed.startswith("x") and out[2].echoed.startswith("y")
    if env is not AsyncEnv:
        assert isinstance(out[3], ExecutionError)
    assert a.step_count == 2 and b.step_count == (1 if env is AsyncEnv else 0)
    payloads = await mgr.step_many([(a, {"message": "p"})], convert=lambda obs: {"got": obs.echoed})
    assert payloads[0]["got"].startswith("p")
    await mgr.shutdown()


async def test_step_batch_of_an_inline_env_stops_at_done_and_at_errors() -> None:
    mgr = SessionManager(InlineEnv, max_sessions=1)
    s = await mgr.open()
    out, err = await mgr.step_batch(s, [{"message": "a"}, {"message": "end"}, {"message": "never"}])
    assert [o.echoed for o in out] == ["a#1", "end#2"] and err is None
    out, err = await mgr.step_batch(s, [{"message": "b"}, {"message": "boom"}, {"message": "never"}])
    assert [o.echoed for o in out] == ["b#3"] and isinstance(err, ExecutionError)
    out, err = await mgr.step_batch(s, [{"message": ""}])
    assert out == [] and isinstance(err, ValidationError)
    assert s.step_count == 3
    await mgr.shutdown()
