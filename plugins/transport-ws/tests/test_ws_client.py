"""The client connector against a real server: URLs, round trips, timeouts, refusals, limits."""

from __future__ import annotations

import asyncio
import socket

import pytest
from ws_support import EchoEnv, LiveServer, eventually, live_server

from openenv.errors import SessionLostError, StepTimeoutError
from openenv.interfaces import ConnectOptions
from openenv_transport_ws.client import WebSocketConnection, WebSocketConnector, is_loopback, ws_url


@pytest.fixture(autouse=True)
def _blocked_slow_steps() -> None:
    EchoEnv.RELEASE.clear()


@pytest.mark.parametrize(("base", "session_id", "expected"), [
    ("http://h:8000", None, "ws://h:8000/ws"),
    ("http://h:8000/", None, "ws://h:8000/ws"),
    ("https://h/p", None, "wss://h/p/ws"),
    ("https://h/p/q/", None, "wss://h/p/q/ws"),
    ("ws://h", None, "ws://h/ws"),
    ("wss://h:9/x", None, "wss://h:9/x/ws"),
    ("h:8000", None, "ws://h:8000/ws"),
    ("localhost:8000//", None, "ws://localhost:8000/ws"),
    ("HTTPS://Space.hf.space", None, "wss://Space.hf.space/ws"),
    ("http://[::1]:8000", None, "ws://[::1]:8000/ws"),
    ("http://h", "abc-123", "ws://h/ws?session_id=abc-123"),
    ("http://h/p/", "a b/c", "ws://h/p/ws?session_id=a%20b%2Fc"),
])
def test_url_conversion(base: str, session_id: str | None, expected: str) -> None:
    assert ws_url(base, session_id) == expected


@pytest.mark.parametrize(("base", "match"), [
    ("http://h/?token=1", "query string"),
    ("http://h#frag", "query string or fragment"),
    ("ftp://h", "Unsupported URL scheme 'ftp'"),
    ("http://", "no host"),
])
def test_url_conversion_refuses_bad_base_urls(base: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        ws_url(base)


@pytest.mark.parametrize(("host", "loopback"), [
    ("localhost", True), ("LOCALHOST", True), ("api.localhost", True), ("127.0.0.1", True),
    ("127.9.9.9", True), ("::1", True), ("[::1]", True), ("10.0.0.1", False),
    ("my-localhost-proxy.example.com", False), ("127.0.0.1.example.com", False), (None, False),
])
def test_is_loopback(host: str | None, loopback: bool) -> None:
    assert is_loopback(host) is loopback


@pytest.fixture
def server() -> LiveServer:  # type: ignore[misc]
    with live_server(EchoEnv, max_sessions=2, max_message_bytes=4096) as srv:
        yield srv


async def test_round_trip_and_idempotent_close(server: LiveServer, monkeypatch: pytest.MonkeyPatch) -> None:
    # A proxy that does not exist: loopback connections must not try it.
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.setenv(var, "http://127.0.0.1:9")
    for var in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(var, raising=False)
    conn = await WebSocketConnector().connect(server.url + "/", ConnectOptions(ping_interval_s=None))
    assert not conn.closed
    reply = await conn.request({"type": "reset", "data": {"episode_id": "c1"}})
    assert reply["type"] == "observation"
    reply = await conn.request({"type": "step", "data": {"message": "hey"}})
    assert reply["data"]["reward"] == pytest.approx(0.3)
    assert await conn.request({"type": "state"}) == {"type": "state", "data": {"episode_id": "c1", "step_count": 1}}
    await conn.close()
    assert conn.closed
    await conn.close()  # idempotent
    # close() returns after the server freed the slot (it closes the env before the handshake).
    assert server.ctx.sessions.active == 0
    with pytest.raises(SessionLostError):
        await conn.receive()


async def test_headers_reach_the_handshake() -> None:
    with live_server(EchoEnv, token="s3cret") as server:
        with pytest.raises(ConnectionError, match=rf"Failed to connect to ws://127.0.0.1:{server.port}/ws: "):
            await WebSocketConnector().connect(server.url, ConnectOptions())
        conn = await WebSocketConnector().connect(
            server.url, ConnectOptions(headers={"Authorization": "Bearer s3cret"}))
        assert (await conn.request({"type": "reset", "data": {}}))["type"] == "observation"
        await conn.close()


async def test_sessions_opened_with_a_token_are_owned_by_its_principal() -> None:
    with live_server(EchoEnv, token="s3cret") as server:
        conn = await WebSocketConnector().connect(
            server.url, ConnectOptions(headers={"X-OpenEnv-Token": "s3cret"}))
        await conn.request({"type": "reset", "data": {}})
        [session] = server.ctx.sessions.sessions()
        # the same owner as an HTTP or MCP session opened with that token: a digest, never the token
        assert session.owner == server.ctx.principal({"authorization": "Bearer s3cret"})
        assert session.owner is not None and session.owner.startswith("token:") and "s3cret" not in session.owner
        await conn.close()
    with live_server(EchoEnv) as server:  # without auth, sessions belong to no one
        conn = await WebSocketConnector().connect(server.url, ConnectOptions())
        await conn.request({"type": "reset", "data": {}})
        assert [s.owner for s in server.ctx.sessions.sessions()] == [None]
        await conn.close()


async def test_connect_failure_is_a_connection_error() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    with pytest.raises(ConnectionError, match=rf"^Failed to connect to ws://127.0.0.1:{port}/ws: "):
        await WebSocketConnector().connect(f"http://127.0.0.1:{port}", ConnectOptions(connect_timeout_s=5))


async def test_timeout_drops_the_socket_and_raises(server: LiveServer) -> None:
    conn = await WebSocketConnector().connect(server.url, ConnectOptions(message_timeout_s=0.2))
    await conn.request({"type": "reset", "data": {}})
    with pytest.raises(StepTimeoutError, match="session is lost") as info:
        await conn.request({"type": "step", "data": {"message": "slow"}})
    assert isinstance(info.value, TimeoutError)
    assert conn.closed
    # Never desynchronised: the late reply can never be read as the answer to a later request.
    with pytest.raises(SessionLostError):
        await conn.request({"type": "state"})
    EchoEnv.RELEASE.set()
    await eventually(lambda: server.ctx.sessions.active == 0)
    await conn.close()  # tolerant of the aborted socket


async def test_queued_capacity_error_is_read_after_the_server_closed() -> None:
    with live_server(EchoEnv, max_sessions=1) as server:
        holder = await WebSocketConnector().connect(server.url, ConnectOptions())
        await holder.request({"type": "reset", "data": {}})
        refused = await WebSocketConnector().connect(server.url, ConnectOptions())
        # Wait until the server's error frame and close have arrived, so our send fails.
        await eventually(lambda: refused.closed)
        reply = await refused.request({"type": "reset", "data": {}})
        assert reply["type"] == "error"
        assert reply["data"]["code"] == "CAPACITY_REACHED"
        assert (reply["data"]["active_sessions"], reply["data"]["max_sessions"]) == (1, 1)
        with pytest.raises(SessionLostError, match="code 1000"):
            await refused.receive()
        await refused.close()
        await holder.close()


async def test_outbound_size_is_checked_locally(server: LiveServer) -> None:
    conn = await WebSocketConnector().connect(server.url, ConnectOptions(max_message_bytes=1 << 20))
    assert isinstance(conn, WebSocketConnection)
    big = {"type": "step", "data": {"message": "x" * 5000}}
    # Before hello we only know our own limit: 5000 bytes are allowed to leave...
    assert conn.max_outbound_bytes == 1 << 20
    hello = await conn.request({"type": "hello", "data": {"want": []}})
    assert hello["data"]["max_message_bytes"] == 4096
    # ...after it, the server's smaller limit applies and nothing is sent.
    assert conn.max_outbound_bytes == 4096
    with pytest.raises(ValueError, match="exceeds the limit of 4096 bytes"):
        await conn.send(big)
    assert not conn.closed
    assert (await conn.request({"type": "state"}))["type"] == "state"
    await conn.close()


async def test_cancelled_request_drops_the_socket(server: LiveServer) -> None:
    conn = await WebSocketConnector().connect(server.url, ConnectOptions())
    await conn.request({"type": "reset", "data": {}})
    task = asyncio.ensure_future(conn.request({"type": "step", "data": {"message": "slow"}}))
    await eventually(lambda: any(s._lock.locked() for s in server.ctx.sessions.sessions()))
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert conn.closed
    with pytest.raises(SessionLostError):
        await conn.request({"type": "state"})
    EchoEnv.RELEASE.set()
    await eventually(lambda: server.ctx.sessions.active == 0)
