"""An env that blocks the event loop is detected and named (issue 21, item 7)."""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import pytest
from websockets.sync.client import connect

from openenv.env import Environment
from openenv.testing import live_server as served
from openenv.types import Action, Observation, State


class Say(Action):
    message: str = "ok"


class InlineSleeper(Environment[Say, Observation, State]):
    """Declares BLOCKING = False (runs on the loop) yet sleeps: the mistake the watchdog reports."""

    BLOCKING = False

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kw: Any) -> Observation:
        return Observation()

    def step(self, action: Say, **kw: Any) -> Observation:
        if action.message == "block":
            time.sleep(1.5)
        return Observation()

    @property
    def state(self) -> State:
        return State()


def test_a_blocked_loop_is_logged_with_the_session_and_env(caplog: pytest.LogCaptureFixture) -> None:
    with (caplog.at_level(logging.WARNING, "openenv.server"),
          served(InlineSleeper, transports=["ws"], loop_block_warn_s=0.3) as srv,
          connect(srv.ws_url, open_timeout=10, proxy=None) as ws):
        ws.send('{"type":"reset","data":{}}')
        ws.recv(timeout=10)
        (session,) = srv.ctx.sessions.sessions()
        ws.send('{"type":"step","data":{"message":"block"}}')
        assert json.loads(ws.recv(timeout=10))["type"] == "observation"
        time.sleep(0.5)  # the watchdog sees the loop run again
    blocked = [r.getMessage() for r in caplog.records if "event loop has been blocked" in r.getMessage()]
    assert len(blocked) == 1, caplog.text
    assert f"session {session.id} (env InlineSleeper)" in blocked[0]
    assert "test_loop_watchdog.py" in blocked[0] and "in step" in blocked[0]
    assert any("running again" in r.getMessage() for r in caplog.records)


class AsyncSleeper(Environment[Say, Observation, State]):
    """An async env that blocks the loop with time.sleep: under a step timeout (Python 3.11's
    wait_for) its step runs in a task of its own, away from the session's frames."""

    async def reset_async(self, seed: int | None = None, episode_id: str | None = None, **kw: Any) -> Observation:
        return Observation()

    async def step_async(self, action: Say, **kw: Any) -> Observation:
        if action.message == "block":
            time.sleep(1.5)  # noqa: ASYNC251 - the mistake the watchdog reports
        return Observation()

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kw: Any) -> Observation:
        raise NotImplementedError

    def step(self, action: Say, **kw: Any) -> Observation:
        raise NotImplementedError

    @property
    def state(self) -> State:
        return State()


def test_a_loop_blocked_by_an_async_env_under_a_step_timeout_names_the_session(
        caplog: pytest.LogCaptureFixture) -> None:
    # Issue 34, item 3: logged as "no session" on Python 3.11 whenever a step timeout was set.
    with (caplog.at_level(logging.WARNING, "openenv.server"),
          served(AsyncSleeper, transports=["ws"], loop_block_warn_s=0.3, step_timeout_s=30) as srv,
          connect(srv.ws_url, open_timeout=10, proxy=None) as ws):
        ws.send('{"type":"reset","data":{}}')
        ws.recv(timeout=10)
        (session,) = srv.ctx.sessions.sessions()
        assert session.runner.kind == "async"
        ws.send('{"type":"step","data":{"message":"block"}}')
        assert json.loads(ws.recv(timeout=10))["type"] == "observation"
        time.sleep(0.5)
    blocked = [r.getMessage() for r in caplog.records if "event loop has been blocked" in r.getMessage()]
    assert len(blocked) == 1, caplog.text
    assert f"session {session.id} (env AsyncSleeper)" in blocked[0]
    assert "in step_async" in blocked[0]
