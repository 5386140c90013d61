"""``HttpConnector`` end to end against a real server, and its mapping of HTTP errors to frames."""

from __future__ import annotations

import asyncio
import socket

import httpx
import pytest
from rest_support import EchoEnv, Serve, bad_factory, wait_until

from openenv.errors import CapacityError, FactoryError, SessionError, SessionLostError, StepTimeoutError
from openenv.interfaces import ConnectOptions
from openenv_transport_rest.client import HttpConnection, HttpConnector, _error_data


async def _connect(url: str, **options: object) -> HttpConnection:
    return await HttpConnector().connect(url, ConnectOptions(**options))  # type: ignore[arg-type]


async def test_episode_and_close(serve: Serve) -> None:
    srv = await serve()
    conn = await _connect(srv.url + "/")
    try:
        assert srv.ctx.sessions.active == 1 and conn.owned
        reply = await conn.request({"type": "reset", "data": {"seed": 1, "episode_id": "ep-1"}})
        assert reply == {"type": "observation", "data": {
            "observation": {"metadata": {}, "echoed_message": "ready", "message_length": 0},
            "reward": 0.0, "done": False, "metadata": None}}
        reply = await conn.request({"type": "step", "data": {"message": "Hello"}})
        assert reply["type"] == "observation" and reply["data"]["reward"] == 0.5
        reply = await conn.request({"type": "step", "data": {"message": "again"}, "kwargs": {"timeout_s": 4}})
        assert reply["data"]["metadata"]["step"] == 2
        reply = await conn.request({"type": "state"})
        assert reply == {"type": "state", "data": {"episode_id": "ep-1", "step_count": 2, "seed": 1,
                                                   "last_timeout_s": 4}}
    finally:
        await conn.close()
    assert conn.closed
    assert srv.ctx.sessions.active == 0 and not EchoEnv.live
    await conn.close()  # idempotent
    with pytest.raises(SessionLostError):
        await conn.send({"type": "state"})


async def test_close_frame_deletes_the_session_without_reply(serve: Serve) -> None:
    srv = await serve()
    conn = await _connect(srv.url)
    await conn.send({"type": "close"})
    assert conn.closed and srv.ctx.sessions.active == 0
    with pytest.raises(SessionLostError):
        await conn.receive()


async def test_error_frames(serve: Serve) -> None:
    srv = await serve()
    conn = await _connect(srv.url)
    try:
        reply = await conn.request({"type": "step", "data": {"message": ""}})
        assert reply["type"] == "error"
        data = reply["data"]
        assert (data["message"], data["code"]) == ("Invalid message", "VALIDATION_ERROR")
        assert [(e["type"], e["loc"]) for e in data["errors"]] == [("string_too_short", ["message"])]

        reply = await conn.request({"type": "reset", "data": {"seed": -1}})
        assert [(e["type"], e["loc"]) for e in reply["data"]["errors"]] == [("greater_than_equal", ["seed"])]

        reply = await conn.request({"type": "step", "data": {"message": "boom"}})
        assert reply["data"]["message"] == "kaboom" and reply["data"]["code"] == "EXECUTION_ERROR"

        reply = await conn.request({"type": "step", "data": {"message": "nan"}})
        assert reply["data"] == {"message": "Non-finite reward: nan", "code": "EXECUTION_ERROR", "status": 500}

        reply = await conn.request({"type": "frobnicate"})
        assert reply["data"] == {"message": "Unknown message type: frobnicate", "code": "UNKNOWN_TYPE"}

        # still usable after every error
        reply = await conn.request({"type": "step", "data": {"message": "fine"}})
        assert reply["type"] == "observation"

        # the session disappears under the connection (closed by someone else, or reaped)
        await srv.ctx.sessions.close(srv.ctx.sessions.get(conn.session_id))
        reply = await conn.request({"type": "state"})
        assert reply["data"]["code"] == "SESSION_ERROR"
        assert reply["data"]["message"] == f"Unknown session_id: {conn.session_id}"
    finally:
        await conn.close()


async def test_mcp_frames(serve: Serve) -> None:
    srv = await serve()
    conn = await _connect(srv.url)
    try:
        reply = await conn.request({"type": "mcp", "data": {"jsonrpc": "2.0", "method": "openenv/session/create",
                                                            "id": 6}})
        assert reply == {"type": "mcp", "data": {"jsonrpc": "2.0", "id": 6,
                                                 "result": {"session_id": conn.session_id}}}
        assert srv.ctx.sessions.active == 1  # no second session was created
        # no MCP transport mounted on this server: a clear error frame, not an exception
        reply = await conn.request({"type": "mcp", "data": {"jsonrpc": "2.0", "method": "tools/list", "id": 7}})
        assert reply["type"] == "error" and reply["data"]["status"] == 404
        assert "POST /mcp answered 404" in reply["data"]["message"]
    finally:
        await conn.close()


async def test_capacity_and_factory_errors_at_connect(serve: Serve) -> None:
    srv = await serve(max_sessions=1)
    holder = await _connect(srv.url)
    try:
        with pytest.raises(CapacityError) as info:
            await _connect(srv.url)
        assert (info.value.active_sessions, info.value.max_sessions) == (1, 1)
        assert str(info.value) == ("Server error: Server at capacity: 1/1 sessions active. Cannot accept new "
                                   "connections. (code: CAPACITY_REACHED)\n  - status: 503")
    finally:
        await holder.close()
    bad = await serve(env=bad_factory)
    with pytest.raises(FactoryError) as finfo:
        await _connect(bad.url)
    assert finfo.value.factory_name == "bad_factory"


async def test_attach_to_existing_session(serve: Serve) -> None:
    srv = await serve()
    async with srv.client() as c:
        sid = (await c.post("/sessions")).json()["session_id"]
    conn = await _connect(srv.url, session_id=sid)
    assert not conn.owned and conn.session_id == sid
    assert (await conn.request({"type": "reset", "data": {"episode_id": "shared"}}))["type"] == "observation"
    await conn.close()
    assert srv.ctx.sessions.get(sid) is not None  # not ours to delete
    with pytest.raises(SessionError) as info:
        await _connect(srv.url, session_id="nope")
    assert info.value.message == "Unknown session_id: nope"


async def test_token_headers(serve: Serve) -> None:
    srv = await serve(token="s3cret")
    with pytest.raises(ConnectionError) as info:
        await _connect(srv.url)
    assert str(info.value).startswith(f"Failed to connect to {srv.url}: HTTP 401")
    assert getattr(info.value, "status", None) == 401 and "set `OPENENV_TOKEN`" in str(info.value)
    conn = await _connect(srv.url, headers={"Authorization": "Bearer s3cret"})
    try:
        assert (await conn.request({"type": "state"}))["type"] == "state"
    finally:
        await conn.close()
    assert srv.ctx.sessions.active == 0


async def test_production_server_drives_held_sessions_as_the_websocket_does(serve: Serve) -> None:
    # The mode rule is the session manager's: in production a session the caller holds resets and
    # steps on HTTP exactly as on /ws; only the strict setting refuses it, with MODE_ERROR.
    srv = await serve(mode="production")
    conn = await _connect(srv.url)
    try:
        assert (await conn.request({"type": "reset"}))["type"] == "observation"
    finally:
        await conn.close()
    strict = await serve(mode="production", strict_production=True)
    conn = await _connect(strict.url)
    try:
        reply = await conn.request({"type": "reset"})
        assert reply["type"] == "error" and reply["data"]["code"] == "MODE_ERROR"
        assert "strict_production" in reply["data"]["message"]
    finally:
        await conn.close()
    assert srv.ctx.sessions.active == 0 and strict.ctx.sessions.active == 0


async def test_connection_refused() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens on this port now
    url = f"http://127.0.0.1:{port}"
    with pytest.raises(ConnectionError) as info:
        await _connect(url, connect_timeout_s=2.0)
    assert str(info.value).startswith(f"Failed to connect to {url}: ConnectError")


async def test_bad_urls_are_refused() -> None:
    with pytest.raises(ValueError, match="http:// or https://"):
        await _connect("ws://127.0.0.1:1")
    with pytest.raises(ValueError, match="query string"):
        await _connect("http://127.0.0.1:1/?x=1")


async def test_timeout_drops_connection_and_frees_the_slot(serve: Serve) -> None:
    srv = await serve(max_sessions=1)
    EchoEnv.slow_s = 0.5
    conn = await _connect(srv.url, message_timeout_s=0.05)
    with pytest.raises(StepTimeoutError):
        await conn.request({"type": "step", "data": {"message": "slow"}})
    assert conn.closed
    with pytest.raises(SessionLostError):
        await conn.send({"type": "state"})
    # abort() sent a DELETE: the server closes the session once the slow step has finished
    assert await wait_until(lambda: srv.ctx.sessions.active == 0, timeout_s=3)
    assert not EchoEnv.live


def _response(status: int, body: object = None, text: str | None = None) -> httpx.Response:
    request = httpx.Request("POST", "http://h/step")
    if text is not None:
        return httpx.Response(status, text=text, request=request)
    return httpx.Response(status, json=body, request=request)


def test_error_mapping_of_upstream_replies() -> None:
    # upstream answers env exceptions with text/plain 500
    assert _error_data(_response(500, text="Internal Server Error")) == {
        "message": "Internal Server Error", "code": "EXECUTION_ERROR", "status": 500}
    # a 503 without a code still means capacity; its counts are kept
    data = _error_data(_response(503, {"detail": "Server at capacity: 2/2", "active_sessions": 2,
                                       "max_sessions": 2}))
    assert (data["code"], data["active_sessions"], data["max_sessions"]) == ("CAPACITY_REACHED", 2, 2)
    assert _error_data(_response(404, {"detail": "Unknown session_id: x"}))["code"] == "SESSION_ERROR"
    data = _error_data(_response(422, {"detail": [{"type": "missing", "loc": ["body", "action"]}]}))
    assert data["errors"] == [{"type": "missing", "loc": ["action"]}]
    assert _error_data(_response(405, {"detail": "Method Not Allowed"}))["code"] == "PROTOCOL_ERROR"


async def test_oversized_body_is_refused_locally(serve: Serve) -> None:
    srv = await serve(max_message_bytes=4096)
    conn = await _connect(srv.url, max_message_bytes=2048)
    try:
        with pytest.raises(ValueError, match="exceeds the limit of 2048 bytes"):
            await conn.send({"type": "step", "data": {"message": "x" * 3000}})
        assert not conn.closed  # nothing was sent; the connection stays usable
        assert (await conn.request({"type": "step", "data": {"message": "small"}}))["type"] == "observation"
    finally:
        await conn.close()


async def test_cancelled_request_drops_the_connection(serve: Serve) -> None:
    srv = await serve(max_sessions=1)
    EchoEnv.slow_s = 0.3
    conn = await _connect(srv.url)
    task = asyncio.create_task(conn.request({"type": "step", "data": {"message": "slow"}}))
    assert await wait_until(lambda: any(s._lock.locked() for s in srv.ctx.sessions.sessions()))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert conn.closed  # its state is unknown: never reused silently
    await conn.close()
    assert await wait_until(lambda: srv.ctx.sessions.active == 0, timeout_s=3)
    assert not EchoEnv.live
