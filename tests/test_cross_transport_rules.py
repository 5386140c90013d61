"""The same request gets the same answer on WebSocket, HTTP and MCP (issue 12 items 1, 9d).

One server mounts all three transports; each test sends the same bad or odd request over each and
compares the OpenEnv error code of the answers:

* on ``/ws`` the code is the error frame's ``data.code``;
* over HTTP it is the JSON body's ``code`` (a 422 body keeps upstream's ``{"detail": [...]}`` shape,
  so 422 is how HTTP spells ``VALIDATION_ERROR``);
* over MCP (JSON-RPC) it is ``error.data.code``.

Where a carrier has no way to say the request at all (JSON-RPC has no step keyword arguments and
no reset/step methods), the test says so instead of inventing an answer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from websockets.sync.client import ClientConnection, connect

from openenv.env import Environment
from openenv.testing import LiveServer as Served
from openenv.testing import live_server as served
from openenv.tools import CallToolAction, CallToolObservation
from openenv.types import State

SID = "OpenEnv-Session-Id"


class CounterEnv(Environment[CallToolAction, CallToolObservation, State]):
    """Steps are tool calls (docs/protocol.md §4.5 kind B, so MCP can drive it too); ``step`` needs ``reset``
    first, as many real envs do (it reads state that only ``reset`` creates)."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    BLOCKING = False

    def reset(self, seed: int | None = None, episode_id: str | None = None) -> CallToolObservation:
        self._count = 0
        return CallToolObservation(tool_name="", result={"count": 0})

    def step(self, action: CallToolAction, temperature: float = 1.0) -> CallToolObservation:
        self._count += 1  # AttributeError before the first reset
        return CallToolObservation(tool_name=action.tool_name, result={"count": self._count}, reward=temperature)

    @property
    def state(self) -> State:
        return State(step_count=getattr(self, "_count", 0))


ACTION = {"type": "call_tool", "tool_name": "count", "arguments": {}}
TOOLS_CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "count", "arguments": {}}}


def _serve(**settings: Any) -> Any:
    return served(CounterEnv, transports=["ws", "rest", "mcp"], **settings)


@pytest.fixture
def server() -> Iterator[Served]:
    with _serve() as srv:
        yield srv


# -- the three carriers ---------------------------------------------------------------------------


@contextmanager
def ws_open(srv: Served, want: list[str] | None = None) -> Iterator[ClientConnection]:
    with connect(srv.ws_url, open_timeout=10, compression=None, proxy=None) as ws:
        if want:
            assert ws_call(ws, {"type": "hello", "data": {"want": want}})["type"] == "hello"
        yield ws


def ws_call(ws: ClientConnection, frame: dict[str, Any]) -> dict[str, Any]:
    ws.send(json.dumps(frame))
    reply: dict[str, Any] = json.loads(ws.recv(timeout=10))
    return reply


def ws_code(reply: dict[str, Any]) -> str:
    assert reply["type"] == "error", reply
    return str(reply["data"]["code"])


def http_code(response: httpx.Response) -> str:
    body = response.json()
    if response.status_code == 422:
        return "VALIDATION_ERROR"
    assert response.status_code >= 400, body
    return str(body["code"])


def mcp_code(reply: dict[str, Any]) -> str:
    assert "error" in reply, reply
    return str(reply["error"]["data"]["code"])


def new_http_session(c: httpx.Client) -> str:
    r = c.post("/sessions")
    assert r.status_code == 201, r.text
    return str(r.json()["session_id"])


# -- the rules ------------------------------------------------------------------------------------


def test_unknown_step_kwargs_are_refused_alike(server: Served) -> None:
    with ws_open(server, ["step_kwargs"]) as ws, httpx.Client(base_url=server.url, timeout=10) as c:
        assert ws_call(ws, {"type": "reset"})["type"] == "observation"
        ws_reply = ws_call(ws, {"type": "step", "data": ACTION, "kwargs": {"temprature": 0.5}})
        sid = new_http_session(c)
        assert c.post("/reset", json={}, headers={SID: sid}).status_code == 200
        http_reply = c.post("/step", json={"action": ACTION, "temprature": 0.5}, headers={SID: sid})
        assert ws_code(ws_reply) == http_code(http_reply) == "VALIDATION_ERROR"
        ws_err, = ws_reply["data"]["errors"]
        http_err, = http_reply.json()["detail"]
        assert (ws_err["type"], ws_err["loc"]) == ("extra_forbidden", ["kwargs", "temprature"])
        assert (http_err["type"], http_err["loc"]) == ("extra_forbidden", ["body", "temprature"])
        # Declared arguments are validated the same way, and pass the same way.
        assert ws_code(ws_call(ws, {"type": "step", "data": ACTION, "kwargs": {"temperature": "hot"}})) == \
            http_code(c.post("/step", json={"action": ACTION, "temperature": "hot"}, headers={SID: sid}))
        ok = ws_call(ws, {"type": "step", "data": ACTION, "kwargs": {"temperature": "0.25"}})
        assert ok["data"]["reward"] == 0.25
        r = c.post("/step", json={"action": ACTION, "temperature": "0.25"}, headers={SID: sid})
        assert r.json()["reward"] == 0.25
        # Upstream's own step fields are dropped when step does not take them, on both.
        assert ws_call(ws, {"type": "step", "data": ACTION, "kwargs": {"timeout_s": 5}})["type"] == "observation"
        assert c.post("/step", json={"action": ACTION, "timeout_s": 5.0, "request_id": "r"},
                      headers={SID: sid}).status_code == 200
    # JSON-RPC has no slot for step keyword arguments (tool arguments are the tool's own).


def test_step_before_reset_says_reset_first_everywhere(server: Served) -> None:
    with ws_open(server) as ws, httpx.Client(base_url=server.url, timeout=10) as c:
        ws_reply = ws_call(ws, {"type": "step", "data": ACTION})
        sid = new_http_session(c)
        http_reply = c.post("/step", json={"action": ACTION}, headers={SID: sid})
        mcp_sid = new_http_session(c)
        mcp_reply = c.post("/mcp", json={**TOOLS_CALL, "params": {**TOOLS_CALL["params"],
                                                                     "session_id": mcp_sid}}).json()
        assert ws_code(ws_reply) == http_code(http_reply) == mcp_code(mcp_reply) == "RESET_REQUIRED"
        assert http_reply.status_code == 409  # never a 500 from the env's AttributeError
        for message in (ws_reply["data"]["message"], http_reply.json()["detail"], mcp_reply["error"]["message"]):
            assert "Call reset first" in message and "AttributeError" in message
        # The session survives: reset, then step works on each carrier.
        assert ws_call(ws, {"type": "reset"})["type"] == "observation"
        assert ws_call(ws, {"type": "step", "data": ACTION})["data"]["observation"]["result"] == {"count": 1}
        assert c.post("/reset", json={}, headers={SID: sid}).status_code == 200
        assert c.post("/step", json={"action": ACTION}, headers={SID: sid}).status_code == 200
    # A one-shot HTTP step (no session header) gets the same code, and is told how to get a session.
    with httpx.Client(base_url=server.url, timeout=10) as c:
        r = c.post("/step", json={"action": ACTION})
        assert http_code(r) == "RESET_REQUIRED" and "POST /sessions" in r.json()["detail"]


def test_strict_production_refuses_reset_and_step_alike_but_not_tools() -> None:
    with _serve(mode="production", strict_production=True) as srv, \
            ws_open(srv) as ws, httpx.Client(base_url=srv.url, timeout=10) as c:
        sid = new_http_session(c)
        for frame, path, body in [({"type": "reset"}, "/reset", {}),
                                  ({"type": "step", "data": ACTION}, "/step", {"action": ACTION})]:
            ws_reply = ws_call(ws, frame)
            http_reply = c.post(path, json=body, headers={SID: sid})
            assert ws_code(ws_reply) == http_code(http_reply) == "MODE_ERROR", path
            assert ws_reply["data"]["message"] == http_reply.json()["detail"]
            assert "strict_production" in ws_reply["data"]["message"]
        # Tools are what production serves: a tool call is refused nowhere by the mode rule (it
        # fails here only because the env needs a reset, with the same code on both carriers).
        tunnelled = ws_call(ws, {"type": "mcp", "data": TOOLS_CALL})["data"]
        direct = c.post("/mcp", json={**TOOLS_CALL, "params": {**TOOLS_CALL["params"], "session_id": sid}}).json()
        assert mcp_code(tunnelled) == mcp_code(direct) == "RESET_REQUIRED"
        # state stays available in strict production.
        assert ws_call(ws, {"type": "state"})["type"] == "state"
        assert c.get("/state", headers={SID: sid}).status_code == 200


def test_production_refuses_session_less_control_requests_only() -> None:
    with _serve(mode="production") as srv, ws_open(srv) as ws, httpx.Client(base_url=srv.url, timeout=10) as c:
        # Held sessions reset and step on /ws and over HTTP alike...
        assert ws_call(ws, {"type": "reset"})["type"] == "observation"
        sid = new_http_session(c)
        assert c.post("/reset", json={}, headers={SID: sid}).status_code == 200
        # ...a session-less HTTP request is refused with the same code and no env is built...
        before = srv.ctx.sessions.active
        r = c.post("/step", json={"action": ACTION})
        assert (r.status_code, http_code(r)) == (404, "MODE_ERROR")
        assert srv.ctx.sessions.active == before
        # ...while a session-less MCP tool call is a tool call: served (the env then needs a reset).
        assert mcp_code(c.post("/mcp", json=TOOLS_CALL).json()) == "RESET_REQUIRED"


def test_capacity_is_reported_alike() -> None:
    with _serve(max_sessions=1) as srv, httpx.Client(base_url=srv.url, timeout=10) as c:
        new_http_session(c)  # the only slot
        with connect(srv.ws_url, open_timeout=10, proxy=None) as ws:
            ws_reply = json.loads(ws.recv(timeout=10))
        http_reply = c.post("/sessions")
        mcp_reply = c.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "openenv/session/create"}).json()
        one_shot = c.post("/step", json={"action": ACTION})
        assert ws_code(ws_reply) == http_code(http_reply) == mcp_code(mcp_reply) == http_code(one_shot) \
            == "CAPACITY_REACHED"
        assert http_reply.status_code == 503
        counts = [(d["active_sessions"], d["max_sessions"]) for d in
                  (ws_reply["data"], http_reply.json(), mcp_reply["error"]["data"])]
        assert counts == [(1, 1)] * 3
