"""A stuck env stalls only its own session, and a hung call never keeps its slot (issue 21, 5 + 6)."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from typing import Any

import pytest

from openenv.context import ServerConfig
from openenv.env import Environment
from openenv.errors import ConfigError, ExecutionError, FactoryError, SessionError
from openenv.sessions import DEFAULT_STEP_TIMEOUT_S, SessionManager
from openenv.types import Action, Observation, State


class Msg(Action):
    message: str = "ok"


class Echo(Observation):
    echoed: str = ""


RELEASE = threading.Event()  # hung calls wait on this; set at the end of every test


class HangingEnv(Environment[Msg, Echo, State]):
    """A blocking env whose ``step("hang")`` never returns until the test releases it."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    entered: list[str] = []
    closed: list[int] = []

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kw: Any) -> Echo:
        return Echo(echoed="ready")

    def step(self, action: Msg, timeout_s: float | None = None, **kw: Any) -> Echo:
        type(self).entered.append(action.message)
        if action.message == "hang":
            RELEASE.wait(30)
        if action.message == "exit":
            os._exit(3)
        if action.message == "sleep":
            time.sleep(30)
        return Echo(echoed=action.message, reward=float(os.getpid()))

    @property
    def state(self) -> State:
        return State()

    def close(self) -> None:
        type(self).closed.append(id(self))


def slow_factory() -> HangingEnv:
    RELEASE.wait(30)
    return HangingEnv()


@pytest.fixture(autouse=True)
def _release() -> Any:
    RELEASE.clear()
    HangingEnv.entered = []
    HangingEnv.closed = []
    yield
    RELEASE.set()


def test_the_default_step_timeout_is_300_seconds() -> None:
    assert DEFAULT_STEP_TIMEOUT_S == 300.0
    assert SessionManager(HangingEnv).step_timeout_s == 300.0
    assert ServerConfig().step_timeout_s == 300.0


async def test_a_timed_out_step_fails_the_session_frees_the_slot_and_never_reenters_the_env(
        caplog: pytest.LogCaptureFixture) -> None:
    mgr = SessionManager(HangingEnv, max_sessions=1, step_timeout_s=0.2)
    s = await mgr.open()
    await mgr.reset(s)
    with caplog.at_level(logging.ERROR, "openenv.sessions"), pytest.raises(ExecutionError) as info:
        await mgr.step(s, {"message": "hang"})
    assert "step timed out after 0.2 seconds" in info.value.message
    assert "open a new session" in info.value.message and info.value.data["session_closed"] is True
    assert mgr.active == 0  # the slot is free while the call still runs
    assert any(s.id in r.getMessage() and "abandoned" in r.getMessage() for r in caplog.records)
    with pytest.raises(SessionError, match="failed: step timed out"):
        await mgr.step(s, {"message": "again"})
    with pytest.raises(SessionError, match="failed"):
        await mgr.reset(s)
    assert HangingEnv.entered == ["hang"]  # nothing else entered the hung instance
    fresh = await mgr.open()  # the only slot is usable again
    await mgr.reset(fresh)
    assert (await mgr.step(fresh, {"message": "hi"})).echoed == "hi"
    await mgr.close(s)  # closing the failed session is a no-op, never close() on the hung env
    await mgr.shutdown()
    assert len(HangingEnv.closed) == 1


async def test_hung_sessions_do_not_delay_a_bystander() -> None:
    mgr = SessionManager(HangingEnv, max_sessions=8, step_timeout_s=None)
    sessions = [await mgr.open() for _ in range(6)]
    hung = [asyncio.create_task(mgr.step(s, {"message": "hang"})) for s in sessions[:5]]
    await asyncio.sleep(0.1)
    assert HangingEnv.entered.count("hang") == 5  # all five are stuck in their envs
    # With a shared pool of 4 threads the bystander's step would queue behind the hung calls.
    obs = await asyncio.wait_for(mgr.step(sessions[5], {"message": "bystander"}), 10)
    assert obs.echoed == "bystander"
    RELEASE.set()
    assert [o.echoed for o in await asyncio.gather(*hung)] == ["hang"] * 5
    await mgr.shutdown()


async def test_close_does_not_wait_behind_a_hung_call() -> None:
    mgr = SessionManager(HangingEnv, max_sessions=1, step_timeout_s=None, close_grace_s=0.2)
    s = await mgr.open()
    hung = asyncio.create_task(mgr.step(s, {"message": "hang"}))
    await asyncio.sleep(0.05)
    await asyncio.wait_for(mgr.close(s, "client gone"), 10)
    assert mgr.active == 0 and HangingEnv.closed == []  # slot freed, close() never entered the env
    with pytest.raises(SessionError, match="still running"):
        await asyncio.wait_for(hung, 10)  # the waiter is woken, not left hanging
    await (await mgr.open()).runner.call(lambda: None)  # noqa: the slot is usable
    await mgr.shutdown()


async def test_the_env_factory_has_a_timeout() -> None:
    mgr = SessionManager(slow_factory, max_sessions=1, factory_timeout_s=0.2, action_type=Msg)
    with pytest.raises(FactoryError, match=r"timed out after 0\.2 seconds") as info:
        await mgr.open()
    assert info.value.data["timeout_s"] == 0.2
    assert mgr.active == 0


def test_process_isolation_refuses_a_factory_a_worker_cannot_import() -> None:
    with pytest.raises(ConfigError, match="cannot be pickled"):
        SessionManager(lambda: HangingEnv(), isolation="process", action_type=Msg)
    with pytest.raises(ConfigError, match="'thread' or 'process'"):
        SessionManager(HangingEnv, isolation="fork")


async def test_process_isolation_runs_the_env_in_its_own_process_and_kills_it_on_timeout() -> None:
    mgr = SessionManager(HangingEnv, max_sessions=2, step_timeout_s=1.0, isolation="process",
                         factory_timeout_s=60)
    a, b = await mgr.open(), await mgr.open()
    await mgr.reset(a)
    obs = await mgr.step(a, {"message": "hi"})
    worker_pid = int(obs.reward or 0)
    assert obs.echoed == "hi" and worker_pid not in (0, os.getpid())
    assert a.runner is not None and a.runner.worker.pid == worker_pid
    with pytest.raises(ExecutionError, match="timed out"):
        await mgr.step(a, {"message": "sleep"})
    assert mgr.active == 1
    assert not a.runner.worker._proc.is_alive()  # killed, not left sleeping
    assert (await mgr.step(b, {"message": "bystander"})).echoed == "bystander"
    await mgr.shutdown()
    assert b.runner is not None and not b.runner.worker._proc.is_alive()


async def test_an_env_that_exits_its_process_is_reported_with_its_session(caplog: pytest.LogCaptureFixture) -> None:
    mgr = SessionManager(HangingEnv, max_sessions=1, isolation="process", factory_timeout_s=60)
    s = await mgr.open()
    with caplog.at_level(logging.ERROR, "openenv.sessions"), pytest.raises(ExecutionError) as info:
        await mgr.step(s, {"message": "exit"})
    assert "exited with code 3 during step" in info.value.message
    assert any(s.id[:8] in r.getMessage() and "code 3" in r.getMessage() for r in caplog.records)
    await mgr.shutdown()
