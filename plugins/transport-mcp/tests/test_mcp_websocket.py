"""WebSocket carriers: raw JSON-RPC on ``/mcp`` (T7, B9, B14) and, with the WebSocket transport
installed, the ``/ws`` step path (T4), the ``type:"mcp"`` tunnel (T5) and ``?session_id=`` attach."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from mcp_support import CalcEnv, make_app, post, rpc, running, wait_until
from websockets.asyncio.client import connect

needs_ws = pytest.mark.requires_plugins("transport-ws")


def _ws(base: str, path: str) -> str:
    return base.replace("http://", "ws://") + path


async def _ask(ws: Any, body: Any) -> dict[str, Any]:
    await ws.send(body if isinstance(body, str | bytes) else json.dumps(body))
    return json.loads(await ws.recv())  # type: ignore[no-any-return]


async def test_t7_raw_json_rpc_over_websocket_survives_bad_input() -> None:
    app = make_app(CalcEnv)
    with running(app) as base:
        async with connect(_ws(base, "/mcp")) as ws:
            reply = await _ask(ws, rpc("tools/call", {"name": "echo_message", "arguments": {"message": "hi"}}, 2))
            assert reply["id"] == 2 and reply["result"]["data"] == "hi"
            assert reply["result"]["structured_content"] == {"result": "hi"}
            reply = await _ask(ws, "bad json")
            assert reply == {"jsonrpc": "2.0", "id": None, "error": {
                "code": -32700, "message": "Parse error: Expecting value: line 1 column 1 (char 0)", "data": None}}
            own = (await _ask(ws, rpc("openenv/session/create", id=3)))["result"]["session_id"]
            reply = await _ask(ws, rpc("openenv/session/close", {"session_id": own}, 5))
            assert reply["error"] == {"code": -32600, "message": "Cannot close active WebSocket-managed session "
                                      "via MCP method", "data": None}
            reply = await _ask(ws, [rpc("tools/list", id=8)])
            assert reply["error"]["code"] == -32600 and reply["error"]["message"] == "Batch requests are not supported"
            reply = await _ask(ws, b"\x00binary")
            assert reply["error"]["code"] == -32700 and "binary frames" in reply["error"]["message"]
            reply = await _ask(ws, 42)
            assert reply["error"]["code"] == -32600
            reply = await _ask(ws, rpc("tools/call", {"name": "hang"}, 9))
            assert reply["error"]["code"] == -32603 and reply["error"]["data"] == {"error_type": "timeout"}
            await ws.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))  # no reply
            reply = await _ask(ws, rpc("tools/list", id=10))  # connection still open, in order
            assert reply["id"] == 10 and len(reply["result"]["tools"]) == 6
            assert app.state.ctx.sessions.active == 1
            # initialize switches this connection to MCP results
            init = await _ask(ws, rpc("initialize", {"protocolVersion": "2025-03-26"}, 11))
            assert init["result"]["protocolVersion"] == "2025-03-26"
            reply = await _ask(ws, rpc("tools/call", {"name": "nope"}, 12))
            assert reply["result"]["isError"] is True
        assert wait_until(lambda: app.state.ctx.sessions.active == 0)


async def test_websocket_capacity_refusal_is_one_frame_then_close() -> None:
    app = make_app(CalcEnv, max_sessions=1)
    with running(app) as base:
        async with connect(_ws(base, "/mcp")) as first:
            assert (await _ask(first, rpc("ping")))["result"] == {}
            async with connect(_ws(base, "/mcp")) as second:
                reply = json.loads(await second.recv())
                assert reply["error"] == {"code": -32000, "message": "Server at capacity: 1/1 sessions active. "
                                          "Cannot accept new connections.",
                                          "data": {"code": "CAPACITY_REACHED", "active_sessions": 1,
                                                   "max_sessions": 1}}
                await second.wait_closed()
                assert second.close_code == 1000


@needs_ws
async def test_t4_step_path_and_t5_tunnel_on_ws() -> None:
    app = make_app(CalcEnv)
    with running(app) as base:
        async with connect(_ws(base, "/ws")) as ws:
            obs = (await _ask(ws, {"type": "step", "data": {"type": "list_tools"}}))["data"]
            assert obs["reward"] is None and obs["done"] is False
            assert all(set(t) == {"name", "description", "input_schema"} for t in obs["observation"]["tools"])
            obs = (await _ask(ws, {"type": "step", "data": {"type": "call_tool", "tool_name": "echo_with_length",
                                                            "arguments": {"message": "Test"}}}))["data"]
            assert obs["observation"]["result"]["data"] == {"message": "Test", "length": 4}
            assert obs["observation"]["error"] is None
            obs = (await _ask(ws, {"type": "step", "data": {"type": "call_tool", "tool_name": "nope"}}))["data"]
            assert obs["observation"]["error"]["error_type"] == "tool_not_found"
            obs = (await _ask(ws, {"type": "step", "data": {"tool_name": "finish", "arguments": {"answer": "42"}}}))
            assert (obs["data"]["reward"], obs["data"]["done"]) == (1.0, True)
            err = (await _ask(ws, {"type": "step", "data": {"message": "not a tool action"}}))["data"]
            assert err["code"] == "VALIDATION_ERROR"
            assert {(e["type"], tuple(e["loc"])) for e in err["errors"]} == {
                ("missing", ("tool_name",)), ("extra_forbidden", ("message",))}
            assert (await _ask(ws, {"type": "state"}))["data"]["step_count"] == 4

            reply = await _ask(ws, {"type": "mcp", "data": rpc("tools/list")})
            assert reply["type"] == "mcp" and reply["data"]["id"] == 1
            assert "inputSchema" in reply["data"]["result"]["tools"][0]
            reply = await _ask(ws, {"type": "mcp", "data": rpc("tools/call", {"name": "echo_message", "arguments":
                                                                               {"message": "via mcp"}}, "abc")})
            assert reply["data"]["id"] == "abc" and reply["data"]["result"]["data"] == "via mcp"
            reply = await _ask(ws, {"type": "mcp", "data": rpc("tools/call", {"name": "nope"}, 3)})
            assert reply["data"]["error"]["code"] == -32603 and reply["data"]["error"]["data"] == {
                "error_type": "tool_not_found"}
            reply = await _ask(ws, {"type": "mcp", "data": rpc("prompts/list", id=4)})
            assert reply["data"]["error"]["message"] == "Method not found: prompts/list"
            reply = await _ask(ws, {"type": "mcp", "data": {"method": "tools/list", "id": 5}})
            assert reply["data"]["error"]["code"] == -32600
            reply = await _ask(ws, {"type": "mcp", "data": {"jsonrpc": "2.0", "method": "notifications/x"}})
            assert reply["data"]["id"] is None  # /ws correlates by position: always one reply
            own = (await _ask(ws, {"type": "mcp", "data": rpc("openenv/session/create", id=6)}))["data"]["result"]
            assert app.state.ctx.sessions.get(own["session_id"]).connections == 1


@needs_ws
async def test_attach_close_while_attached_is_deferred_to_detach() -> None:
    app = make_app(CalcEnv)
    ctx = app.state.ctx
    with running(app) as base, httpx.Client(timeout=10) as client:
        sid = post(client, base, rpc("openenv/session/create", {})).json()["result"]["session_id"]
        async with connect(_ws(base, f"/ws?session_id={sid}")) as ws:
            assert (await _ask(ws, {"type": "reset", "data": {}}))["type"] == "observation"
            post(client, base, rpc("tools/call", {"name": "echo_message", "arguments": {"message": "x"},
                                                  "session_id": sid}))
            assert (await _ask(ws, {"type": "state"}))["data"]["step_count"] == 1  # one env, two carriers
            closing = post(client, base, rpc("openenv/session/close", {"session_id": sid})).json()["result"]
            assert closing == {"session_id": sid, "closed": False, "closing": True}
            assert ctx.sessions.active == 1
        assert wait_until(lambda: ctx.sessions.active == 0)
