"""Upstream's JSON-RPC dialect on ``POST /mcp`` (docs/protocol.md §4, T6) with our fixes (B5, B7, B15, B16)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from mcp_support import CalcEnv, PlainEnv, make_app, post, rpc, running

from openenv.env import Environment
from openenv.tools import CallToolAction, CallToolObservation, ListToolsAction, ListToolsObservation, Tool
from openenv.types import Observation, State

MCP_KEYS = {"name", "title", "description", "inputSchema", "outputSchema", "annotations"}


@pytest.fixture
def served() -> Any:
    app = make_app(CalcEnv)
    with running(app) as base, httpx.Client(timeout=10) as client:
        yield base, client, app.state.ctx


def _ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.text
    body = response.json()
    assert set(body) == {"jsonrpc", "id", "result"}, body
    return body["result"]


def _err(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, response.text  # upstream's client raises on non-2xx
    body = response.json()
    assert set(body) == {"jsonrpc", "id", "error"}, body
    assert set(body["error"]) == {"code", "message", "data"}
    return body["error"]  # type: ignore[no-any-return]


def test_t6_session_lifecycle_list_call_close(served: Any) -> None:
    base, client, ctx = served
    sid = _ok(post(client, base, rpc("openenv/session/create", {})))["session_id"]
    assert ctx.sessions.active == 1
    tools = _ok(post(client, base, rpc("tools/list", {"session_id": sid}, 2)))["tools"]
    names = [t["name"] for t in tools]
    assert names == ["echo_message", "echo_with_length", "divide", "hang", "finish", "set_seed"]  # no 'submit'
    assert all(set(t) == MCP_KEYS for t in tools)
    echo = tools[0]
    assert echo["description"] == "Echo back the provided message."
    assert echo["inputSchema"] == {"additionalProperties": False, "type": "object", "required": ["message"],
                                   "properties": {"message": {"type": "string", "description": "What to echo."}}}
    result = _ok(post(client, base, rpc("tools/call", {"name": "echo_with_length", "arguments": {"message": "Test"},
                                                       "session_id": sid}, 3)))
    assert result["content"] == [{"type": "text", "text": '{"message":"Test","length":4}'}]
    assert result["structured_content"] == result["structuredContent"] == {"message": "Test", "length": 4}
    assert result["data"] == {"message": "Test", "length": 4}
    assert result["is_error"] is False and result["isError"] is False
    err = _err(post(client, base, rpc("tools/list", {"session_id": "bogus"}, 4)))
    assert err == {"code": -32602, "message": "Unknown session_id: bogus", "data": None}
    assert _ok(post(client, base, rpc("openenv/session/close", {"session_id": sid}, 5))) == {
        "session_id": sid, "closed": True}
    assert ctx.sessions.active == 0
    err = _err(post(client, base, rpc("openenv/session/close", {"session_id": sid}, 6)))
    assert err["code"] == -32602 and err["message"] == f"Unknown session_id: {sid}"
    err = _err(post(client, base, rpc("openenv/session/close", {}, 7)))
    assert err["message"] == "Invalid params - 'session_id' is required"


def test_envelope_errors(served: Any) -> None:
    base, client, _ = served
    body = post(client, base, b"garbage").json()
    assert body == {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error", "data": None}}
    assert post(client, base, [rpc("tools/list")]).json()["error"]["code"] == -32700  # batch, as upstream
    assert post(client, base, 42).json()["error"]["code"] == -32700
    err = _err(post(client, base, {"method": "tools/list", "id": 5}))
    assert err["code"] == -32600 and err["message"].startswith("Invalid request: ") and "jsonrpc" in err["message"]
    err = _err(post(client, base, {**rpc("tools/list"), "params": [1]}))
    assert err["code"] == -32600 and "'params' must be an object" in err["message"]
    err = _err(post(client, base, {**rpc("tools/list"), "extra": 1}))
    assert err["code"] == -32600 and "'extra'" in err["message"]
    assert _err(post(client, base, rpc("prompts/list")))["message"] == "Method not found: prompts/list"
    assert _err(post(client, base, rpc("tools/call", {"arguments": {}})))["message"] == "Missing 'name' in params"
    err = _err(post(client, base, rpc("tools/call", {"name": "echo_message", "arguments": [1]})))
    assert err["code"] == -32602 and "'arguments' must be an object" in err["message"]


def test_notifications_get_no_reply_but_run(served: Any) -> None:
    base, client, _ = served
    response = post(client, base, {"jsonrpc": "2.0", "method": "tools/list"})
    assert response.status_code == 202 and response.content == b""
    response = post(client, base, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert response.status_code == 202 and response.content == b""


@pytest.mark.parametrize(("name", "arguments", "error_type", "text"), [
    ("nope", {}, "tool_not_found", "Unknown tool: 'nope'"),
    ("echo_message", {"message": 5}, "invalid_args", "Input should be a valid string"),
    ("echo_message", {}, "invalid_args", "message: Field required"),
    ("divide", {"a": 1, "b": 0}, "execution_error", "Error calling tool 'divide': float division by zero"),
    ("hang", {}, "timeout", "Tool 'hang' timed out after 0.3 seconds"),
    ("submit", {"answer": "x"}, "tool_not_found", "not available in simulation mode"),
])
def test_bad_tool_calls_are_classified_and_the_session_survives(
        served: Any, name: str, arguments: dict[str, Any], error_type: str, text: str) -> None:
    base, client, ctx = served
    sid = _ok(post(client, base, rpc("openenv/session/create", {})))["session_id"]
    err = _err(post(client, base, rpc("tools/call", {"name": name, "arguments": arguments, "session_id": sid})))
    assert err["code"] == -32603  # upstream's client raises on it; data says where it failed (B7)
    assert err["data"] == {"error_type": error_type}
    assert text in err["message"]
    result = _ok(post(client, base, rpc("tools/call", {"name": "echo_message", "arguments": {"message": "still"},
                                                       "session_id": sid})))
    assert result["data"] == "still"
    assert ctx.sessions.get(sid).step_count == 2


def test_session_less_calls_use_a_transient_counted_session(served: Any) -> None:
    base, client, ctx = served
    result = _ok(post(client, base, rpc("tools/call", {"name": "echo_message", "arguments": {"message": "x"}})))
    assert result["data"] == "x"
    assert len(_ok(post(client, base, rpc("tools/list")))["tools"]) == 6
    assert ctx.sessions.active == 0  # closed after the call


def test_rewards_and_done_reach_the_env_on_the_json_rpc_path(served: Any) -> None:
    base, client, ctx = served
    CalcEnv.rewarded.clear()
    sid = _ok(post(client, base, rpc("openenv/session/create", {})))["session_id"]
    _ok(post(client, base, rpc("tools/call", {"name": "finish", "arguments": {"answer": "42"}, "session_id": sid})))
    assert CalcEnv.rewarded == ["finish"]
    assert ctx.sessions.get(sid).env.state.step_count == 1


def test_capacity_on_session_create_and_one_shot_calls() -> None:
    app = make_app(CalcEnv, max_sessions=1)
    with running(app) as base, httpx.Client(timeout=10) as client:
        _ok(post(client, base, rpc("openenv/session/create", {})))
        for body in (rpc("openenv/session/create", {}), rpc("tools/call", {"name": "echo_message",
                                                                          "arguments": {"message": "x"}})):
            err = _err(post(client, base, body))
            assert err == {"code": -32000, "message": "Server at capacity: 1/1 sessions active. Cannot accept new "
                           "connections.",
                           "data": {"code": "CAPACITY_REACHED", "active_sessions": 1, "max_sessions": 1}}


def test_non_tool_env_does_not_support_mcp() -> None:
    app = make_app(PlainEnv)
    with running(app) as base, httpx.Client(timeout=10) as client:
        for body in (rpc("tools/list"), rpc("tools/call", {"name": "x"})):
            err = _err(post(client, base, body))
            assert err == {"code": -32603, "message": "Environment does not support MCP", "data": None}
        assert _err(post(client, base, rpc("tools/call", {})))["message"] == "Missing 'name' in params"
        assert app.state.ctx.sessions.active == 0


def test_production_mode_hides_simulation_tools() -> None:
    app = make_app(CalcEnv, mode="production")
    with running(app) as base, httpx.Client(timeout=10) as client:
        names = [t["name"] for t in _ok(post(client, base, rpc("tools/list")))["tools"]]
        assert "submit" in names and "set_seed" not in names
        err = _err(post(client, base, rpc("tools/call", {"name": "set_seed", "arguments": {"seed": 1}})))
        assert err["data"] == {"error_type": "tool_not_found"}
        assert "not available in production mode" in err["message"]
        result = _ok(post(client, base, rpc("tools/call", {"name": "submit", "arguments": {"answer": "a"}})))
        assert result["data"] == "submitted a"


def test_token_auth_and_session_ownership() -> None:
    app = make_app(CalcEnv, token="alpha")
    ctx = app.state.ctx
    # The kernel takes one token; accept a second one here to play two principals.
    ctx.authorized = lambda headers: (headers.get("authorization") or "") in ("Bearer alpha", "Bearer beta")
    alice = {"Authorization": "Bearer alpha"}
    bob = {"Authorization": "Bearer beta"}
    with running(app) as base, httpx.Client(timeout=10) as client:
        assert post(client, base, rpc("openenv/session/create", {})).status_code == 401
        sid = _ok(post(client, base, rpc("openenv/session/create", {}), headers=alice))["session_id"]
        for body in (rpc("openenv/session/close", {"session_id": sid}),
                     rpc("tools/call", {"name": "echo_message", "arguments": {"message": "x"}, "session_id": sid}),
                     rpc("tools/list", {"session_id": sid})):
            err = _err(post(client, base, body, headers=bob))
            assert err == {"code": -32602, "message": f"Unknown session_id: {sid}", "data": None}
        assert ctx.sessions.active == 1
        assert _ok(post(client, base, rpc("openenv/session/close", {"session_id": sid}), headers=alice))["closed"]
        assert ctx.sessions.active == 0


class StepToolsEnv(Environment[CallToolAction, CallToolObservation, State]):
    """Spec §4.5 kind B: no tool registry; the env handles MCP actions in its own step."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Observation:
        return Observation()

    def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        if isinstance(action, ListToolsAction):
            return ListToolsObservation(tools=[Tool(name="ping", description="Ping.", input_schema={})])
        return CallToolObservation(tool_name=action.tool_name, result={"pong": action.arguments})

    @property
    def state(self) -> State:
        return State()


def test_kind_b_env_answers_through_its_step() -> None:
    app = make_app(StepToolsEnv)
    with running(app) as base, httpx.Client(timeout=10) as client:
        tools = _ok(post(client, base, rpc("tools/list")))["tools"]
        assert tools == [{"name": "ping", "description": "Ping.", "input_schema": {}}]
        result = _ok(post(client, base, rpc("tools/call", {"name": "ping", "arguments": {"x": 1}})))
        assert result == {"done": False, "reward": None, "metadata": {}, "tool_name": "ping",
                          "result": {"pong": {"x": 1}}, "error": None}


def test_oversized_requests_are_refused_with_the_limit() -> None:
    app = make_app(CalcEnv, max_message_bytes=2048)
    with running(app) as base, httpx.Client(timeout=10) as client:
        response = post(client, base, rpc("tools/call", {"name": "echo_message", "arguments": {"message": "x" * 4096}}))
        assert response.status_code == 413
        assert "at most 2048 bytes" in response.json()["error"]["message"]
        assert _ok(post(client, base, rpc("tools/list")))["tools"]  # still serving
