"""Session lifecycle over /ws: capacity, factory failure, attach, size limits, timeouts, drops."""

from __future__ import annotations

import asyncio

import pytest
from ws_support import (
    EchoEnv,
    LiveServer,
    bad_factory,
    closed_with,
    eventually,
    live_server,
    plugin_manager,
    recv,
    rpc,
    send,
    ws_open,
)

from openenv.server import ServerConfig, create_app


@pytest.fixture(autouse=True)
def _blocked_slow_steps() -> None:
    EchoEnv.RELEASE.clear()


async def test_capacity_refusal_is_one_error_frame_then_close_1000() -> None:
    with live_server(EchoEnv, max_sessions=1) as server:
        holder = await ws_open(server)
        assert (await rpc(holder, {"type": "reset", "data": {}}))["type"] == "observation"
        refused = await ws_open(server)  # the handshake succeeds (docs/protocol.md §3.1)
        assert await recv(refused) == {"type": "error", "data": {
            "message": "Server at capacity: 1/1 sessions active. Cannot accept new connections.",
            "code": "CAPACITY_REACHED", "active_sessions": 1, "max_sessions": 1}}
        assert await closed_with(refused) == (1000, "")
        # The holder is untouched and the refused connection left nothing behind.
        assert (await rpc(holder, {"type": "step", "data": {"message": "hi"}}))["type"] == "observation"
        assert server.ctx.sessions.active == 1
        await holder.close()
        await eventually(lambda: server.ctx.sessions.active == 0)
        again = await ws_open(server)
        assert (await rpc(again, {"type": "reset", "data": {}}))["type"] == "observation"
        await again.close()


async def test_factory_failure_is_one_error_frame_then_close() -> None:
    with live_server(bad_factory) as server:
        ws = await ws_open(server)
        reply = await recv(ws)
        assert reply["type"] == "error"
        data = reply["data"]
        assert {k: data[k] for k in ("message", "code", "factory_name")} == {
            "message": "Environment factory 'bad_factory' failed to create instance.",
            "code": "FACTORY_ERROR", "factory_name": "bad_factory"}
        assert "the factory is broken" in data["detail"]
        assert await closed_with(ws) == (1000, "")
        assert server.ctx.sessions.active == 0


async def test_attach_unknown_session_id() -> None:
    with live_server(EchoEnv) as server:
        ws = await ws_open(server, "?session_id=nope")
        assert await recv(ws) == {"type": "error", "data": {
            "message": "Unknown session_id: nope", "code": "SESSION_ERROR"}}
        assert await closed_with(ws) == (1000, "")
        assert server.ctx.sessions.active == 0


async def test_attach_double_attach_and_survival_across_detach() -> None:
    with live_server(EchoEnv, max_sessions=2) as server:
        sessions = server.ctx.sessions
        session = server.call(sessions.open(transport="http"))
        first = await ws_open(server, f"?session_id={session.id}")
        await rpc(first, {"type": "reset", "data": {"episode_id": "shared"}})
        assert session.connections == 1

        second = await ws_open(server, f"?session_id={session.id}")
        assert await recv(second) == {"type": "error", "data": {
            "message": f"Session {session.id} already has an attached WebSocket", "code": "SESSION_ERROR"}}
        assert await closed_with(second) == (1000, "")

        # Hello reports the attached session's own id.
        reply = await rpc(first, {"type": "hello", "data": {"want": []}})
        assert reply["data"]["session_id"] == session.id

        # Detaching (even with a close frame) keeps an attached session alive.
        await send(first, {"type": "close"})
        assert await closed_with(first) == (1000, "")
        assert sessions.active == 1 and session.connections == 0 and not session.closed

        third = await ws_open(server, f"?session_id={session.id}")
        assert (await rpc(third, {"type": "state"}))["data"] == {"episode_id": "shared", "step_count": 0}
        await third.close()
        await eventually(lambda: session.connections == 0)
        server.call(sessions.close(session))
        assert sessions.active == 0


async def test_oversized_frame_checked_by_the_handler_closes_1009_with_the_limit() -> None:
    # uvicorn would accept 1 MiB; the handler enforces the configured 2048 bytes itself (as it must
    # under ASGI servers without a frame limit).
    with live_server(EchoEnv, max_message_bytes=2048, ws_max_size=1 << 20) as server:
        ws = await ws_open(server)
        # 600 three-byte characters = 1800 bytes: under the limit, served normally.
        ok = await rpc(ws, {"type": "step", "data": {"message": "€" * 600}})
        assert ok["type"] == "observation"
        # 700 three-byte characters = 2100 bytes (only 700 characters): over the limit.
        await send(ws, {"type": "step", "data": {"message": "€" * 700}})
        code, reason = await closed_with(ws)
        assert code == 1009
        assert "max_message_bytes=2048" in (reason or "")
        assert server.ctx.sessions.active == 0


async def test_oversized_frame_refused_by_uvicorn_frees_the_session() -> None:
    with live_server(EchoEnv, max_message_bytes=2048) as server:
        ws = await ws_open(server)
        await rpc(ws, {"type": "reset", "data": {}})
        await send(ws, {"type": "step", "data": {"message": "x" * 4000}})
        code, _ = await closed_with(ws)
        assert code == 1009
        await eventually(lambda: server.ctx.sessions.active == 0)


async def test_slow_step_past_step_timeout_fails_the_session_and_frees_the_slot() -> None:
    # Issue 21: the timed-out call still runs in the env, so nothing may enter that env again.
    with live_server(EchoEnv, step_timeout_s=0.2) as server:
        ws = await ws_open(server)
        await rpc(ws, {"type": "reset", "data": {"episode_id": "slowpoke"}})
        reply = await rpc(ws, {"type": "step", "data": {"message": "slow"}})
        assert reply["type"] == "error"
        assert reply["data"]["code"] == "EXECUTION_ERROR"
        assert reply["data"]["message"].startswith("step timed out after 0.2 seconds; ")
        assert server.ctx.sessions.active == 0  # the slot is free while the env is still stuck
        reply = await rpc(ws, {"type": "state"})
        assert reply["type"] == "error" and reply["data"]["code"] == "SESSION_ERROR"
        assert "failed: step timed out" in reply["data"]["message"]
        EchoEnv.RELEASE.set()
        fresh = await ws_open(server)  # a new connection gets a new session in the freed slot
        assert (await rpc(fresh, {"type": "reset", "data": {}}))["type"] == "observation"
        await fresh.close()
        await ws.close()


async def test_disconnect_mid_step_closes_the_owned_session() -> None:
    with live_server(EchoEnv) as server:
        EchoEnv.closed.clear()
        ws = await ws_open(server)
        await rpc(ws, {"type": "reset", "data": {"episode_id": "dropped"}})
        await send(ws, {"type": "step", "data": {"message": "slow"}})
        (session,) = server.ctx.sessions.sessions()
        await eventually(lambda: session._lock.locked())  # the step is running
        ws.transport.abort()  # vanish without a close frame
        await asyncio.sleep(0.05)
        assert server.ctx.sessions.active == 1  # still stepping: the slot is not freed early
        EchoEnv.RELEASE.set()
        await eventually(lambda: server.ctx.sessions.active == 0)
        assert EchoEnv.closed == ["dropped"]


async def test_production_mode_keeps_reset_and_step() -> None:
    with live_server(EchoEnv, mode="production") as server:
        ws = await ws_open(server)
        assert (await rpc(ws, {"type": "reset", "data": {}}))["type"] == "observation"
        assert (await rpc(ws, {"type": "step", "data": {"message": "hi"}}))["type"] == "observation"
        await ws.close()


async def test_strict_production_refuses_reset_and_step_recoverably() -> None:
    cfg = ServerConfig(mode="production", transports=["ws"], strict_production=True)


    app = create_app(EchoEnv, config=cfg, plugin_manager=plugin_manager())
    server = LiveServer(app, ws_max_size=cfg.max_message_bytes)
    server.start()
    try:
        ws = await ws_open(server)
        for frame in ({"type": "reset", "data": {}}, {"type": "step", "data": {"message": "x"}}):
            reply = await rpc(ws, frame)
            assert reply["data"]["code"] == "MODE_ERROR"
            assert "strict_production" in reply["data"]["message"]
        assert (await rpc(ws, {"type": "state"}))["type"] == "state"
        await ws.close()
    finally:
        server.stop()


async def test_session_closed_under_the_connection_is_fatal() -> None:
    with live_server(EchoEnv) as server:
        ws = await ws_open(server)
        await rpc(ws, {"type": "reset", "data": {}})
        (session,) = server.ctx.sessions.sessions()
        server.call(server.ctx.sessions.close(session, "test"))  # e.g. server shutdown
        assert await rpc(ws, {"type": "state"}) == {"type": "error", "data": {
            "message": "Session environment not initialized for websocket", "code": "SESSION_ERROR"}}
        assert await closed_with(ws) == (1000, "")
        assert server.ctx.sessions.active == 0


async def test_connected_idle_session_is_never_reaped() -> None:
    with live_server(EchoEnv, idle_timeout_s=0.05) as server:
        ws = await ws_open(server)
        await rpc(ws, {"type": "reset", "data": {"episode_id": "idle"}})
        (session,) = server.ctx.sessions.sessions()
        session.last_activity -= 60  # idle far beyond the timeout...
        server.call(server.ctx.sessions.reap_idle())
        # ...but connected: still alive.
        assert (await rpc(ws, {"type": "state"}))["data"] == {"episode_id": "idle", "step_count": 0}
        await ws.close()
