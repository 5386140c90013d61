"""``MCPToolClient``: the upstream 0.10 flow (POST /mcp + attached /ws) with a verified attach, the
step-path fallback (B3), errors that raise instead of returning ``[]``, and the sync twin."""

from __future__ import annotations

from typing import Any

import pytest
from mcp_support import CalcEnv, PlainEnv, make_app, running, wait_until, ws_plugin

from openenv.tools import CallToolObservation, ListToolsObservation, Tool
from openenv_transport_mcp.client import (
    McpSessionError,
    MCPToolClient,
    SyncMCPToolClient,
    ToolCallFailed,
    ToolListError,
    mcp_url,
)

pytestmark = pytest.mark.requires_plugins("transport-ws")


def _client(base: str, **kwargs: Any) -> MCPToolClient:
    from openenv_transport_ws.client import WebSocketConnector

    return MCPToolClient(base, connector=WebSocketConnector(), **kwargs)


def _ignore_attach(app: Any) -> Any:
    """An ASGI wrapper that drops ``?session_id=`` on ``/ws``, like a 0.3.x server."""

    async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "websocket" and scope["path"] == "/ws":
            scope = {**scope, "query_string": b""}
        await app(scope, receive, send)

    return asgi


def test_mcp_url() -> None:
    assert mcp_url("http://h:1") == "http://h:1/mcp"
    assert mcp_url("wss://h/prefix/") == "https://h/prefix/mcp"
    assert mcp_url("h:8000") == "http://h:8000/mcp"


async def test_json_rpc_path_with_verified_attach() -> None:
    app = make_app(CalcEnv)
    ctx = app.state.ctx
    with running(app) as base:
        async with _client(base) as env:
            assert env.tool_path == "jsonrpc" and env.http_session_id is not None
            assert ctx.sessions.active == 1  # one session shared by both carriers
            await env.reset()
            tools = await env.list_tools()
            assert [t.name for t in tools][:2] == ["echo_message", "echo_with_length"]
            assert all(isinstance(t, Tool) for t in tools)
            assert await env.call_tool("echo_with_length", message="Test") == {"message": "Test", "length": 4}
            with pytest.raises(ToolCallFailed) as info:
                await env.call_tool("divide", a=1, b=0)
            assert info.value.error_type == "execution_error"
            assert str(info.value).startswith("Tool 'divide' failed: Error calling tool 'divide'")
            step = await env.call_tool_step("finish", answer="42")
            assert isinstance(step.observation, CallToolObservation) and (step.reward, step.done) == (1.0, True)
            assert (await env.state())["step_count"] == 3
            assert await env.has_tool("submit") is False
        assert wait_until(lambda: ctx.sessions.active == 0)


async def test_ignored_attach_falls_back_to_the_step_path() -> None:
    app = make_app(CalcEnv)
    ctx = app.state.ctx
    with running(_ignore_attach(app)) as base:
        async with _client(base) as env:
            assert env.tool_path == "step" and env.http_session_id is None
            assert wait_until(lambda: ctx.sessions.active == 1)  # the HTTP session was closed
            listed = await env.step({"type": "list_tools"})
            assert isinstance(listed.observation, ListToolsObservation)
            assert await env.call_tool("echo_message", message="hi") == "hi"
            with pytest.raises(ToolCallFailed) as info:
                await env.call_tool("hang")
            assert info.value.error_type == "timeout"
            assert len(await env.list_tools()) == 6
        assert wait_until(lambda: ctx.sessions.active == 0)


async def test_server_without_mcp_route_uses_the_step_path() -> None:
    from openenv.plugins import PluginManager
    from openenv.server import create_app

    pm = PluginManager(strict=True, entry_points=[])
    pm.register(ws_plugin)
    app = create_app(CalcEnv, transports=["ws"], plugin_manager=pm)
    with running(app) as base:
        async with _client(base) as env:
            assert env.tool_path == "step"
            assert await env.call_tool("echo_message", message="x") == "x"


async def test_errors_raise_instead_of_returning_empty() -> None:
    app = make_app(PlainEnv)
    with running(app) as base:
        async with _client(base) as env:
            assert env.tool_path == "jsonrpc"
            with pytest.raises(ToolListError, match="Environment does not support MCP"):
                await env.list_tools()
    full = make_app(CalcEnv, max_sessions=1)
    with running(full) as base:
        async with _client(base) as first:
            await first.reset()
            with pytest.raises(McpSessionError, match="Failed to create MCP session: Server at capacity") as info:
                await _client(base).connect()
            assert info.value.data["max_sessions"] == 1


def test_sync_twin() -> None:
    app = make_app(CalcEnv)
    with running(app) as base:
        from openenv_transport_ws.client import WebSocketConnector

        with SyncMCPToolClient(base, connector=WebSocketConnector()) as env:
            env.reset()
            assert env.list_tools()[0].name == "echo_message"
            assert env.call_tool("echo_message", message="sync") == "sync"
            with pytest.raises(ToolCallFailed):
                env.call_tool("nope")
        assert wait_until(lambda: app.state.ctx.sessions.active == 0)
