"""Opt-in extensions (docs/protocol.md §12): hello, step kwargs, request ids; the MCP hook; capabilities."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from ws_support import URL, EchoEnv, LiveServer, closed_with, live_server, rpc, send, ws_open


@pytest.fixture
def server() -> Iterator[LiveServer]:
    with live_server(EchoEnv, max_sessions=2, max_message_bytes=4096) as srv:
        yield srv


async def test_hello_grants_supported_extensions(server: LiveServer) -> None:
    ws = await ws_open(server)
    reply = await rpc(ws, {"type": "hello", "data": {"want": ["ids", "binary_msgpack", "step_kwargs"]}})
    (session,) = server.ctx.sessions.sessions()
    assert reply == {"type": "hello", "data": {
        "session_id": session.id, "extensions": ["step_kwargs", "ids"],
        "max_message_bytes": 4096, "protocol": "openenv-ws/2"}}
    await ws.close()


async def test_hello_without_data_grants_nothing(server: LiveServer) -> None:
    ws = await ws_open(server)
    reply = await rpc(ws, {"type": "hello", "id": 5})
    assert reply["data"]["extensions"] == []
    assert reply["id"] == 5  # hello itself may always carry an id
    # Nothing negotiated: ids are still envelope errors.
    reply = await rpc(ws, {"type": "state", "id": 1})
    assert reply["data"]["errors"][0]["loc"] == ["id"]
    await ws.close()


@pytest.mark.parametrize(("data", "error"), [
    ({"want": "ids"}, {"type": "list_type", "loc": ["data", "want"], "msg": "Input should be a valid list",
                       "input": "ids", "url": URL + "list_type"}),
    ({"want": ["ids", 3]}, {"type": "string_type", "loc": ["data", "want", 1],
                            "msg": "Input should be a valid string", "input": 3, "url": URL + "string_type"}),
])
async def test_hello_validation(server: LiveServer, data: dict[str, Any], error: dict[str, Any]) -> None:
    ws = await ws_open(server)
    reply = await rpc(ws, {"type": "hello", "data": data})
    assert reply == {"type": "error", "data": {"message": "Invalid message", "code": "VALIDATION_ERROR",
                                               "errors": [error]}}
    await ws.close()


async def test_step_kwargs_after_negotiation(server: LiveServer) -> None:
    ws = await ws_open(server)
    await rpc(ws, {"type": "hello", "data": {"want": ["step_kwargs"]}})
    await rpc(ws, {"type": "reset", "data": {"episode_id": "kw"}})
    reply = await rpc(ws, {"type": "step", "data": {"message": "hi"}, "kwargs": {"timeout_s": "2.5", "note": "n"}})
    assert reply["data"]["metadata"] == {"original_message": "hi", "step": 1, "timeout_s": 2.5, "note": "n"}

    bad = await rpc(ws, {"type": "step", "data": {"message": "hi"}, "kwargs": {"bogus": 1}})
    assert bad["data"]["code"] == "VALIDATION_ERROR"
    assert [(e["type"], e["loc"]) for e in bad["data"]["errors"]] == [("extra_forbidden", ["kwargs", "bogus"])]

    bad = await rpc(ws, {"type": "step", "data": {"message": "hi"}, "kwargs": {"timeout_s": "soon"}})
    assert [(e["type"], e["loc"]) for e in bad["data"]["errors"]] == [("float_parsing", ["kwargs", "timeout_s"])]

    bad = await rpc(ws, {"type": "step", "data": {"message": "hi"}, "kwargs": {"action": {}}})
    assert [(e["type"], e["loc"]) for e in bad["data"]["errors"]] == [("extra_forbidden", ["kwargs", "action"])]

    bad = await rpc(ws, {"type": "step", "data": {"message": "hi"}, "kwargs": [1]})
    assert [(e["type"], e["loc"]) for e in bad["data"]["errors"]] == [("dict_type", ["kwargs"])]

    # kwargs are a step-only slot; ids were not negotiated.
    bad = await rpc(ws, {"type": "reset", "data": {}, "kwargs": {}})
    assert [(e["type"], e["loc"]) for e in bad["data"]["errors"]] == [("extra_forbidden", ["kwargs"])]
    # Failed frames did not step.
    assert (await rpc(ws, {"type": "state"}))["data"] == {"episode_id": "kw", "step_count": 1}
    await ws.close()


async def test_ids_are_echoed_after_negotiation(server: LiveServer) -> None:
    ws = await ws_open(server)
    hello = await rpc(ws, {"type": "hello", "id": "h1", "data": {"want": ["ids"]}})
    assert hello["id"] == "h1"
    reply = await rpc(ws, {"type": "reset", "id": 1, "data": {"episode_id": "ids"}})
    assert (reply["type"], reply["id"]) == ("observation", 1)
    reply = await rpc(ws, {"type": "step", "id": "two", "data": {"message": ""}})
    assert (reply["type"], reply["id"]) == ("error", "two")
    reply = await rpc(ws, {"type": "nope", "id": [3]})
    assert (reply["data"]["code"], reply["id"]) == ("UNKNOWN_TYPE", [3])
    reply = await rpc(ws, {"type": "state", "id": None})
    assert reply == {"type": "state", "data": {"episode_id": "ids", "step_count": 0}, "id": None}
    reply = await rpc(ws, {"type": "state"})  # id stays optional
    assert "id" not in reply
    # step kwargs were not granted
    reply = await rpc(ws, {"type": "step", "id": 5, "data": {"message": "x"}, "kwargs": {}})
    assert [e["loc"] for e in reply["data"]["errors"]] == [["kwargs"]]
    await send(ws, {"type": "close", "id": 9})  # close still has no reply
    assert await closed_with(ws) == (1000, "")


async def test_mcp_frames_default_and_plugged_handler(server: LiveServer) -> None:
    ws = await ws_open(server)
    reply = await rpc(ws, {"type": "mcp", "data": {"jsonrpc": "2.0", "method": "tools/list", "id": 1}})
    assert reply == {"type": "mcp", "data": {"jsonrpc": "2.0", "id": 1, "error": {
        "code": -32603, "message": "Environment does not support MCP", "data": None}}}

    seen: list[Any] = []

    async def handler(session: Any, request: dict[str, Any]) -> dict[str, Any] | None:
        seen.append(session.id)
        if "id" not in request:
            return None  # a notification
        return {"jsonrpc": "2.0", "id": request.get("id"), "result": {"session_id": session.id}}

    server.ctx.mcp_handler = handler  # what the MCP transport plugs in
    try:
        reply = await rpc(ws, {"type": "mcp", "data": {"jsonrpc": "2.0", "method": "openenv/session/create",
                                                      "id": "x"}})
        # Exactly one reply per frame, even for a notification.
        note = await rpc(ws, {"type": "mcp", "data": {"jsonrpc": "2.0", "method": "notifications/x"}})
    finally:
        server.ctx.mcp_handler = None
    assert note == {"type": "mcp", "data": {"jsonrpc": "2.0", "id": None, "result": None}}
    (session,) = server.ctx.sessions.sessions()
    assert reply == {"type": "mcp", "data": {"jsonrpc": "2.0", "id": "x", "result": {"session_id": session.id}}}
    assert seen == [session.id, session.id]
    await ws.close()


def test_capabilities_advertise_the_extensions(server: LiveServer) -> None:
    with httpx.Client(base_url=server.url, trust_env=False, timeout=10) as http:
        caps = http.get("/capabilities").json()
    assert {"hello", "ids", "step_kwargs"} <= set(caps["extensions"])
    assert caps["transports"] == ["ws"]
    assert caps["max_message_bytes"] == 4096
