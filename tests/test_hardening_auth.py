"""One credential rule, several tokens with isolated principals (issue 21, item 10)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from openenv.env import Environment
from openenv.testing import LiveServer as Served
from openenv.testing import live_server as served
from openenv.testing import wait_until
from openenv.tools import CallToolAction, CallToolObservation
from openenv.types import State

TOKENS = {"tok-alice": "alice", "tok-bob": "bob", "tok-alice-2": "alice"}
GATE = threading.Event()


class SlowStartEnv(Environment[CallToolAction, CallToolObservation, State]):
    """Blocking env; building one waits for ``GATE`` when ``GATE`` is clear (to hold a session in
    its initializing phase)."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        GATE.wait(20)

    def reset(self, seed: int | None = None, episode_id: str | None = None) -> CallToolObservation:
        return CallToolObservation(tool_name="")

    def step(self, action: CallToolAction) -> CallToolObservation:
        return CallToolObservation(tool_name=action.tool_name)

    @property
    def state(self) -> State:
        return State()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def server() -> Iterator[Served]:
    GATE.set()
    with served(SlowStartEnv, transports=["ws", "rest", "mcp"], tokens=TOKENS) as srv:
        yield srv
    GATE.set()


@pytest.mark.parametrize("second", [("Authorization", "Bearer tok-bob"), ("X-OpenEnv-Token", "tok-bob")])
def test_several_credentials_are_refused(server: Served, second: tuple[str, str]) -> None:
    headers: list[tuple[str, str]] = [("Authorization", "Bearer tok-alice"), second]
    r = httpx.post(server.url + "/sessions", headers=headers, timeout=10)
    assert r.status_code == 400 and r.json()["code"] == "AMBIGUOUS_CREDENTIALS"
    assert server.ctx.sessions.active == 0  # refused before any session exists


def test_tokens_file_principals_are_isolated(server: Served) -> None:
    assert httpx.post(server.url + "/sessions", headers=bearer("nope"), timeout=10).status_code == 401
    r = httpx.post(server.url + "/sessions", headers=bearer("tok-alice"), timeout=10)
    assert r.status_code == 201, r.text
    sid = r.json()["session_id"]
    (session,) = server.ctx.sessions.sessions()
    assert session.owner == "principal:alice"
    assert httpx.get(f"{server.url}/sessions/{sid}", headers=bearer("tok-alice-2"), timeout=10).status_code == 200
    other = httpx.get(f"{server.url}/sessions/{sid}", headers=bearer("tok-bob"), timeout=10)
    assert other.status_code == 404 and sid in other.text
    gone = httpx.delete(f"{server.url}/sessions/{sid}", headers=bearer("tok-bob"), timeout=10)
    assert gone.status_code == 404 and server.ctx.sessions.active == 1


def _pending_id(srv: Served) -> str:
    pending = wait_until(lambda: [s for s in srv.ctx.sessions.sessions() if not s.ready], timeout_s=10)
    if not pending:
        raise AssertionError("no session started initializing")
    return pending[0].id


def test_an_initializing_session_is_not_revealed_to_another_principal(server: Served) -> None:
    GATE.clear()
    results: dict[str, Any] = {}
    opener = threading.Thread(target=lambda: results.update(r=httpx.post(
        server.url + "/sessions", headers=bearer("tok-alice"), timeout=30)))
    opener.start()
    try:
        sid = _pending_id(server)
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-03-26", "capabilities": {},
                           "clientInfo": {"name": "t", "version": "1"}}}
        bob = httpx.post(server.url + "/mcp", json=init, timeout=10,
                         headers={**bearer("tok-bob"), "OpenEnv-Session-Id": sid}).json()
        assert "initializing" not in bob["error"]["message"] and "Unknown session_id" in bob["error"]["message"]
        alice = httpx.post(server.url + "/mcp", json=init, timeout=10,
                           headers={**bearer("tok-alice"), "OpenEnv-Session-Id": sid}).json()
        assert "initializing" in alice["error"]["message"]  # the owner is told to retry
        rest_bob = httpx.get(f"{server.url}/sessions/{sid}", headers=bearer("tok-bob"), timeout=10)
        assert rest_bob.status_code == 404
    finally:
        GATE.set()
        opener.join(30)
    assert results["r"].status_code == 201
