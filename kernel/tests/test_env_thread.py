"""The hop of a blocking env's call to its session's thread (``openenv.sessions.runner``): outcomes,
deadlines and cancellation reach the caller, and a call nobody waits for any more never runs."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from openenv.env import Environment
from openenv.errors import ExecutionError, SessionError
from openenv.sessions import SessionManager
from openenv.sessions.runner import EnvThread, Runner
from openenv.types import Action, Observation, State


class Msg(Action):
    message: str = "ok"


class Echo(Observation):
    echoed: str = ""


class StopEnv(Environment[Msg, Echo, State]):
    """A blocking env whose ``step("stop")`` raises ``StopIteration`` (e.g. ``next()`` on an
    exhausted iterator of tasks)."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kw: Any) -> Echo:
        return Echo(echoed="ready")

    def step(self, action: Msg, timeout_s: float | None = None, **kw: Any) -> Echo:
        if action.message == "stop":
            next(iter(()))
        return Echo(echoed=action.message)

    @property
    def state(self) -> State:
        return State()


def _runner() -> Runner:
    return Runner("thread", EnvThread("openenv-session-test"), True)


async def test_results_and_exceptions_reach_the_caller() -> None:
    runner = _runner()
    try:
        assert await runner.call(lambda a, b=0: (a, b, threading.current_thread().name), 1, b=2) == (
            1, 2, "openenv-session-test")
        with pytest.raises(KeyError, match="missing"):
            await runner.call({}.__getitem__, "missing", timeout=5)
    finally:
        runner.shutdown()


async def test_a_step_raising_stop_iteration_is_an_error_of_that_step_not_a_hang() -> None:
    # A future refuses StopIteration; handed over as is, the caller was never woken and the step
    # "timed out", failing its session.
    mgr = SessionManager(StopEnv, max_sessions=1, step_timeout_s=5)
    session = await mgr.open()
    await mgr.reset(session)
    with pytest.raises(ExecutionError, match="StopIteration"):
        await asyncio.wait_for(mgr.step(session, {"message": "stop"}), 3)
    assert (await mgr.step(session, {"message": "ok"})).echoed == "ok"  # the session goes on
    await mgr.shutdown()


async def test_a_call_queued_past_its_deadline_times_out_and_never_runs() -> None:
    runner = _runner()
    release = threading.Event()
    ran: list[str] = []
    try:
        first = asyncio.ensure_future(runner.call(release.wait, 10))
        await asyncio.sleep(0.05)  # the first call has entered the thread
        with pytest.raises(TimeoutError):
            await runner.call(ran.append, "late", timeout=0.1)
        release.set()
        assert await first is True
        assert await runner.call(ran.append, "next", timeout=5) is None
        assert ran == ["next"]  # the timed-out call was skipped, not run late
    finally:
        release.set()
        runner.shutdown()


async def test_a_call_whose_caller_was_cancelled_never_runs() -> None:
    runner = _runner()
    release = threading.Event()
    ran: list[str] = []
    try:
        first = asyncio.ensure_future(runner.call(release.wait, 10))
        await asyncio.sleep(0.05)
        queued = asyncio.ensure_future(runner.call(ran.append, "cancelled"))
        await asyncio.sleep(0.05)
        queued.cancel()
        with pytest.raises(asyncio.CancelledError):
            await queued
        release.set()
        await first
        await runner.call(ran.append, "next", timeout=5)
        assert ran == ["next"]
    finally:
        release.set()
        runner.shutdown()


async def test_abandon_wakes_the_running_and_queued_calls_and_refuses_new_ones() -> None:
    runner = _runner()
    release = threading.Event()
    ran: list[str] = []
    try:
        running = asyncio.ensure_future(runner.call(release.wait, 10))
        await asyncio.sleep(0.05)
        queued = asyncio.ensure_future(runner.call(ran.append, "queued"))
        await asyncio.sleep(0.05)
        runner.abandon("Session s failed: step timed out")
        for fut in (running, queued):
            with pytest.raises(SessionError, match="step timed out"):
                await asyncio.wait_for(fut, 2)
        with pytest.raises(SessionError, match="step timed out"):
            await runner.call(ran.append, "after")
        release.set()  # the abandoned call returns late: its result is dropped, nothing else runs
        await asyncio.sleep(0.1)
        assert ran == []
    finally:
        release.set()
