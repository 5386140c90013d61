"""Real MCP on ``/mcp`` (Streamable HTTP, JSON responses): raw requests, FastMCP's client and the
official SDK's client, over real sockets (docs/protocol.md §11 B7, B14, B15)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from mcp_support import CalcEnv, make_app, post, rpc, running, wait_until

from openenv_transport_mcp.handler import SUPPORTED_PROTOCOL_VERSIONS

INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "0"}}


@pytest.fixture
def served() -> Any:
    app = make_app(CalcEnv)
    with running(app) as base, httpx.Client(timeout=10) as client:
        yield base, client, app.state.ctx


def _start(client: httpx.Client, base: str, **headers: str) -> tuple[str, dict[str, Any]]:
    response = post(client, base, rpc("initialize", INIT), headers=headers)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/json")
    return response.headers["mcp-session-id"], response.json()


def test_initialize_negotiates_and_binds_a_session(served: Any) -> None:
    base, client, ctx = served
    mcp_sid, body = _start(client, base)
    assert len(mcp_sid) == 32 and body["id"] == 1
    init = body["result"]
    assert init["protocolVersion"] == "2025-06-18"
    assert init["capabilities"] == {"tools": {"listChanged": False}}
    assert init["serverInfo"]["name"] == "CalcEnv"
    assert ctx.sessions.active == 1
    headers = {"mcp-session-id": mcp_sid, "mcp-protocol-version": "2025-06-18"}
    response = post(client, base, {"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    assert response.status_code == 202 and response.content == b""
    assert post(client, base, rpc("ping", id=2), headers=headers).json()["result"] == {}
    # an unknown version is answered with ours
    assert post(client, base, rpc("initialize", {**INIT, "protocolVersion": "1999-01-01"})).json()[
        "result"]["protocolVersion"] == SUPPORTED_PROTOCOL_VERSIONS[0]


def test_mcp_results_and_tool_failures_as_is_error(served: Any) -> None:
    base, client, ctx = served
    mcp_sid, _ = _start(client, base)
    headers = {"mcp-session-id": mcp_sid}
    tools = post(client, base, rpc("tools/list", id=2), headers=headers).json()["result"]["tools"]
    assert [t["name"] for t in tools] == ["echo_message", "echo_with_length", "divide", "hang", "finish",
                                           "set_seed"]
    result = post(client, base, rpc("tools/call", {"name": "echo_message", "arguments": {"message": "hi"}}, 3),
                  headers=headers).json()["result"]
    assert result == {"content": [{"type": "text", "text": "hi"}], "structuredContent": {"result": "hi"},
                      "isError": False}
    for name, arguments, kind in (("nope", {}, "tool_not_found"), ("echo_message", {"message": 1}, "invalid_args"),
                                  ("echo_message", {}, "invalid_args"), ("divide", {"a": 1, "b": 0},
                                                                         "execution_error"),
                                  ("hang", {}, "timeout")):
        body = post(client, base, rpc("tools/call", {"name": name, "arguments": arguments}, 4),
                    headers=headers).json()
        assert body["result"]["isError"] is True, body
        assert body["result"]["_meta"]["openenv/error_type"] == kind
        assert body["result"]["content"][0]["type"] == "text"
    result = post(client, base, rpc("tools/call", {"name": "finish", "arguments": {"answer": "42"}}, 5),
                  headers=headers).json()["result"]
    assert result["_meta"] == {"openenv/reward": 1.0, "openenv/done": True}
    batch = post(client, base, [rpc("ping")], headers=headers).json()
    assert batch["error"]["code"] == -32600 and batch["error"]["message"] == "Batch requests are not supported"
    assert post(client, base, rpc("ping", id=6), headers=headers).json()["result"] == {}  # still alive
    assert ctx.sessions.active == 1


def test_session_header_errors_get_and_delete(served: Any) -> None:
    base, client, ctx = served
    response = post(client, base, rpc("tools/list"), headers={"mcp-session-id": "nope"})
    assert response.status_code == 404 and response.json()["error"]["code"] == -32600
    mcp_sid, _ = _start(client, base)
    response = post(client, base, rpc("tools/list"), headers={"mcp-session-id": mcp_sid,
                                                              "mcp-protocol-version": "1999-01-01"})
    assert response.status_code == 400 and "Unsupported MCP-Protocol-Version" in response.text
    again = post(client, base, rpc("initialize", INIT), headers={"mcp-session-id": mcp_sid}).json()
    assert again["error"]["code"] == -32600 and "already initialized" in again["error"]["message"]
    assert client.get(base + "/mcp").status_code == 405
    assert client.delete(base + "/mcp").status_code == 400
    assert client.delete(base + "/mcp", headers={"mcp-session-id": mcp_sid}).status_code == 204
    assert ctx.sessions.active == 0
    assert post(client, base, rpc("ping"), headers={"mcp-session-id": mcp_sid}).status_code == 404


def test_initialize_can_bind_an_existing_openenv_session(served: Any) -> None:
    base, client, ctx = served
    sid = post(client, base, rpc("openenv/session/create", {})).json()["result"]["session_id"]
    mcp_sid, _ = _start(client, base, **{"OpenEnv-Session-Id": sid})
    headers = {"mcp-session-id": mcp_sid}
    post(client, base, rpc("tools/call", {"name": "echo_message", "arguments": {"message": "x"}}), headers=headers)
    assert ctx.sessions.get(sid).step_count == 1
    created = post(client, base, rpc("openenv/session/create", {}), headers=headers).json()["result"]
    assert created == {"session_id": sid}
    assert client.delete(base + "/mcp", headers=headers).status_code == 204
    assert ctx.sessions.get(sid).ready  # not ours to close
    bad = post(client, base, rpc("initialize", INIT), headers={"OpenEnv-Session-Id": "nope"}).json()
    assert bad["error"] == {"code": -32602, "message": "Unknown session_id: nope", "data": None}


def test_reaped_session_ends_the_mcp_session() -> None:
    app = make_app(CalcEnv, idle_timeout_s=0.2)
    with running(app) as base, httpx.Client(timeout=10) as client:
        mcp_sid, _ = _start(client, base)
        assert wait_until(lambda: app.state.ctx.sessions.active == 0)
        assert post(client, base, rpc("ping"), headers={"mcp-session-id": mcp_sid}).status_code == 404


async def test_fastmcp_client_initialises_lists_and_calls_tools() -> None:
    from fastmcp import Client
    from fastmcp.exceptions import ToolError

    app = make_app(CalcEnv)
    with running(app) as base:
        async with Client(base + "/mcp") as client:
            tools = await client.list_tools()
            assert [t.name for t in tools][:2] == ["echo_message", "echo_with_length"]
            schema = getattr(tools[0], "input_schema", None) or tools[0].inputSchema  # mcp 2.x renamed it
            assert schema["properties"]["message"]["type"] == "string"
            result = await client.call_tool("echo_message", {"message": "hello"})
            assert result.data == "hello" and result.is_error is False
            result = await client.call_tool("echo_with_length", {"message": "Test"})
            assert result.data == {"message": "Test", "length": 4}
            with pytest.raises(ToolError, match="Error calling tool 'divide'"):
                await client.call_tool("divide", {"a": 1, "b": 0})
            with pytest.raises(ToolError, match="Invalid arguments"):
                await client.call_tool("echo_message", {"msg": "x"})
            assert await client.ping()
            assert app.state.ctx.sessions.active == 1
        # the client's DELETE ended the MCP session and so its env
        assert wait_until(lambda: app.state.ctx.sessions.active == 0)


async def test_official_mcp_sdk_client() -> None:
    from mcp import Client

    app = make_app(CalcEnv, mode="production")
    with running(app) as base:
        async with Client(base + "/mcp") as client:  # probes server/discover, falls back to initialize
            listed = await client.list_tools()
            names = [t.name for t in listed.tools]
            assert "submit" in names and "set_seed" not in names
            result = await client.call_tool("submit", {"answer": "a"})
            assert result.is_error is False and result.structured_content == {"result": "submitted a"}
            result = await client.call_tool("set_seed", {"seed": 1})
            assert result.is_error is True
            assert "not available in production mode" in result.content[0].text
