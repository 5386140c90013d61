"""Concurrency-safe envs get many sessions by default; unsafe envs keep one (issue 12 item 9a)."""

from __future__ import annotations

import json
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect

from openenv.env import Environment
from openenv.errors import RuleViolation
from openenv.sessions import DEFAULT_CONCURRENT_SESSIONS
from openenv.testing import live_server as served
from openenv.types import Action, Observation, State


class Act(Action):
    message: str = ""


class SafeEnv(Environment[Act, Observation, State]):
    SUPPORTS_CONCURRENT_SESSIONS = True
    BLOCKING = False

    def reset(self, seed: int | None = None, episode_id: str | None = None) -> Observation:
        return Observation()

    def step(self, action: Act) -> Observation:
        return Observation(reward=1.0)

    @property
    def state(self) -> State:
        return State()


class UnsafeEnv(SafeEnv):
    SUPPORTS_CONCURRENT_SESSIONS = False


def _open_ws(stack: ExitStack, url: str) -> dict[str, Any]:
    ws = stack.enter_context(connect(url, open_timeout=10, proxy=None))
    ws.send(json.dumps({"type": "reset"}))
    reply: dict[str, Any] = json.loads(ws.recv(timeout=10))
    return reply


def test_a_concurrency_safe_env_serves_many_sessions_without_a_bound_given() -> None:
    assert DEFAULT_CONCURRENT_SESSIONS == 64
    with served(SafeEnv, transports=["ws"]) as srv:
        assert srv.ctx.config.max_sessions == srv.ctx.sessions.max_sessions == DEFAULT_CONCURRENT_SESSIONS
        assert httpx.get(srv.url + "/capabilities").json()["max_sessions"] == DEFAULT_CONCURRENT_SESSIONS
        with ExitStack() as stack:  # a trainer opens one session per generation
            replies = [_open_ws(stack, srv.ws_url) for _ in range(8)]
            assert [r["type"] for r in replies] == ["observation"] * 8
            assert srv.ctx.sessions.active == 8


def test_an_unsafe_env_keeps_one_session() -> None:
    with served(UnsafeEnv, transports=["ws"]) as srv:
        assert srv.ctx.sessions.max_sessions == 1
        with ExitStack() as stack:
            assert _open_ws(stack, srv.ws_url)["type"] == "observation"
            with connect(srv.ws_url, open_timeout=10, proxy=None) as ws:
                refused = json.loads(ws.recv(timeout=10))  # sent unasked, then the server closes
            assert refused["type"] == "error" and refused["data"]["code"] == "CAPACITY_REACHED"


def test_an_explicit_bound_wins_and_the_rules_still_hold() -> None:
    with served(SafeEnv, transports=["ws"], max_sessions=2) as srv:
        assert srv.ctx.sessions.max_sessions == 2
    with pytest.raises(RuleViolation, match="SUPPORTS_CONCURRENT_SESSIONS"):
        served(UnsafeEnv, transports=["ws"], max_sessions=2).__enter__()
    with pytest.raises(RuleViolation, match="at least 1"):
        served(SafeEnv, transports=["ws"], max_sessions=0).__enter__()


@pytest.mark.usefixtures("no_leftover_processes")
def test_openenv_serve_uses_the_default(cli_env: dict[str, str], tmp_path: Path, wait_until: Any) -> None:
    ready = tmp_path / "ready.json"
    with open(tmp_path / "serve.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "openenv", "serve", "echo", "--port", "0", "--ready-file", str(ready),
             "--log-level", "warning"],
            stdout=log, stderr=subprocess.STDOUT, env=cli_env, start_new_session=True)
    try:
        info = wait_until(lambda: ready.exists() and json.loads(ready.read_text()), timeout_s=30)
        assert info, (tmp_path / "serve.log").read_text()
        caps = httpx.get(f"http://127.0.0.1:{info['port']}/capabilities", timeout=10).json()
        assert caps["max_sessions"] == DEFAULT_CONCURRENT_SESSIONS  # echo declares SUPPORTS_CONCURRENT_SESSIONS
    finally:
        proc.kill()
        proc.wait(timeout=30)
