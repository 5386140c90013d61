"""The MCP echo env: upstream's echo tools, T4 semantics, concurrency safety, registration.

Env-level tests use the real session manager; the served tests (upstream's client flow over real
sockets) run when the MCP and WebSocket transports are installed too.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import openenv_env_echo_mcp.plugin
from openenv.plugins import PluginManager
from openenv.sessions import SessionManager
from openenv.tools import CallToolObservation, ListToolsObservation
from openenv_env_echo_mcp.env import EchoMcpEnv


def test_registered_lazily_as_echo_mcp() -> None:
    pm = PluginManager(strict=True, entry_points=[])
    pm.register(openenv_env_echo_mcp.plugin)
    assert pm.catalog.envs.get("echo_mcp").ref == "openenv_env_echo_mcp.env:EchoMcpEnv"


async def test_t4_semantics_through_the_session_manager() -> None:
    manager = SessionManager(EchoMcpEnv, max_sessions=2, idle_timeout_s=None)
    session = await manager.open()
    try:
        obs = await manager.reset(session, {})
        assert obs.metadata == {"status": "ready", "message": "Echo environment ready!"} and obs.reward == 0.0
        listed = await manager.step(session, {"type": "list_tools"})
        assert isinstance(listed, ListToolsObservation)
        tools = listed.model_dump()["tools"]
        assert [t["name"] for t in tools] == ["echo_message", "echo_with_length"]
        assert tools[0]["description"] == "Echo back the provided message."
        assert tools[1]["description"] == "Echo back the message with its length."
        schema = tools[0]["input_schema"]
        assert schema["required"] == ["message"] and schema["additionalProperties"] is False
        assert schema["properties"]["message"]["type"] == "string"
        call = await manager.step(session, {"type": "call_tool", "tool_name": "echo_with_length",
                                            "arguments": {"message": "Test"}})
        assert isinstance(call, CallToolObservation) and call.error is None and call.reward is None
        assert call.result == {"content": [{"type": "text", "text": '{"message":"Test","length":4}'}],
                               "structured_content": {"message": "Test", "length": 4},
                               "data": {"message": "Test", "length": 4}, "is_error": False}
        call = await manager.step(session, {"tool_name": "echo_message", "arguments": {"message": "hi"}})
        assert call.result["data"] == "hi" and call.result["structured_content"] == {"result": "hi"}
        call = await manager.step(session, {"type": "call_tool", "tool_name": "nope", "arguments": {}})
        assert call.error.error_type == "tool_not_found" and "Unknown tool: 'nope'" in call.error.message
        call = await manager.step(session, {"type": "call_tool", "tool_name": "echo_message",
                                            "arguments": {"msg": "x"}})
        assert call.error.error_type == "invalid_args"
        assert (await manager.state(session))["step_count"] == 5
    finally:
        await manager.shutdown()


async def test_sessions_are_independent() -> None:
    manager = SessionManager(EchoMcpEnv, max_sessions=8, idle_timeout_s=None)
    sessions = [await manager.open() for _ in range(8)]
    try:
        async def work(i: int, s: Any) -> Any:
            await manager.reset(s, {"episode_id": f"ep-{i}"})
            for _ in range(i):
                await manager.step(s, {"tool_name": "echo_message", "arguments": {"message": str(i)}})
            return await manager.state(s)

        states = await asyncio.gather(*(work(i, s) for i, s in enumerate(sessions)))
        assert [(st["episode_id"], st["step_count"]) for st in states] == [(f"ep-{i}", i) for i in range(8)]
    finally:
        await manager.shutdown()


@pytest.mark.requires_plugins("transport-mcp", "transport-ws")
def test_upstream_echo_client_flow_over_real_sockets() -> None:
    """What upstream's MCP echo client example does (list, call both tools), with our client."""
    import openenv_transport_mcp.plugin
    from openenv.server import create_app
    from openenv.testing import LiveServer
    from openenv_transport_mcp.client import SyncMCPToolClient
    from openenv_transport_ws import plugin as ws
    from openenv_transport_ws.client import WebSocketConnector

    pm = PluginManager(strict=True, entry_points=[])
    pm.register(openenv_transport_mcp.plugin)
    pm.register(ws)
    pm.register(openenv_env_echo_mcp.plugin)
    app = create_app("echo_mcp", transports=["mcp", "ws"], plugin_manager=pm, max_sessions=2)
    with LiveServer(app) as server, SyncMCPToolClient(server.url, connector=WebSocketConnector()) as env:
        env.reset()
        assert [t.name for t in env.list_tools()] == ["echo_message", "echo_with_length"]
        assert env.call_tool("echo_message", message="Hello!") == "Hello!"
        assert env.call_tool("echo_with_length", message="Test") == {"message": "Test", "length": 4}
