"""``KeepAlivePool`` / ``KeepAliveTransport`` against real sockets on 127.0.0.1: reuse, one write per
request, replies by length / chunks / EOF, stale connections, the resend rule, timeouts."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import httpx
import pytest

from openenv_transport_rest.keepalive import KeepAlivePool, KeepAliveTransport

TIMEOUTS: dict[str, float | None] = {"connect": 5.0, "read": 5.0, "write": 5.0}


@dataclass
class Peer:
    """One accepted connection: the chunks read from it (each ``read`` of the server is one)."""

    port: int
    requests: list[bytes] = field(default_factory=list)
    close_after: bool = False  # set by a handler: close once this reply is written


Handler = Callable[[Peer, bytes], Awaitable[bytes | None]]


@dataclass
class RawServer:
    url: str
    port: int
    peers: list[Peer]


@pytest.fixture
async def raw_server() -> AsyncIterator[Callable[[Handler], Awaitable[RawServer]]]:
    """``await raw_server(handler)``: an HTTP/1.1 server whose ``handler(peer, request)`` returns the
    raw reply bytes, or ``None`` to close the connection without replying."""
    servers: list[asyncio.Server] = []

    async def start(handler: Handler) -> RawServer:
        peers: list[Peer] = []

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            peer = Peer(writer.get_extra_info("peername")[1])
            peers.append(peer)
            try:
                while True:
                    head = await reader.readuntil(b"\r\n\r\n")
                    length = 0
                    for line in head.split(b"\r\n"):
                        if line.lower().startswith(b"content-length:"):
                            length = int(line.split(b":", 1)[1])
                    request = head + (await reader.readexactly(length) if length else b"")
                    peer.requests.append(request)
                    reply = await handler(peer, request)
                    if reply is None:
                        break
                    writer.write(reply)
                    await writer.drain()
                    if peer.close_after:
                        break
            except (asyncio.IncompleteReadError, ConnectionError):
                pass
            finally:
                writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        servers.append(server)
        port = server.sockets[0].getsockname()[1]
        return RawServer(f"http://127.0.0.1:{port}", port, peers)

    try:
        yield start
    finally:
        for server in servers:
            server.close()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 5)


def ok(body: bytes = b'{"ok":true}', *extra: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\ncontent-length: " + str(len(body)).encode() + b"\r\n" + b"".join(extra) + b"\r\n" + body


async def test_reuse_and_one_write_per_request(raw_server) -> None:  # type: ignore[no-untyped-def]
    async def handler(peer: Peer, request: bytes) -> bytes:
        return ok()

    srv = await raw_server(handler)
    async with httpx.AsyncClient(base_url=srv.url, transport=KeepAliveTransport("127.0.0.1", srv.port)) as client:
        for i in range(10):
            response = await client.post("/step", content=b'{"n":%d}' % i, headers={"x-test": "1"})
            assert response.status_code == 200 and response.json() == {"ok": True}
            assert response.reason_phrase == "OK" and response.http_version == "HTTP/1.1"
    assert len(srv.peers) == 1 and len(srv.peers[0].requests) == 10
    first = srv.peers[0].requests[0]
    assert first.startswith(b"POST /step HTTP/1.1\r\n") and first.endswith(b'\r\n\r\n{"n":0}')
    assert b"\r\nx-test: 1\r\n" in first and b"\r\nContent-Length: 7\r\n" in first


async def test_chunked_and_connection_close_replies(raw_server) -> None:  # type: ignore[no-untyped-def]
    replies = iter([
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n"
        b"4;ext=1\r\nabcd\r\n3\r\nefg\r\n0\r\nx-trailer: t\r\n\r\n",
        ok(b"closing", b"connection: close\r\n"),
        ok(b"new connection"),
    ])

    async def handler(peer: Peer, request: bytes) -> bytes:
        return next(replies)

    srv = await raw_server(handler)
    pool = KeepAlivePool("127.0.0.1", srv.port)
    try:
        get = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
        reply = await pool.exchange("GET", get, TIMEOUTS)
        assert (reply.status, reply.body) == (200, b"abcdefg")
        assert (await pool.exchange("GET", get, TIMEOUTS)).body == b"closing"
        assert len(srv.peers) == 1
        assert (await pool.exchange("GET", get, TIMEOUTS)).body == b"new connection"
        assert len(srv.peers) == 2  # connection: close was honoured
    finally:
        pool.close()


async def test_a_reply_without_length_is_read_to_eof(raw_server) -> None:  # type: ignore[no-untyped-def]
    async def handler(peer: Peer, request: bytes) -> bytes:
        peer.close_after = True
        return b"HTTP/1.1 500 Oops\r\ncontent-type: text/plain\r\n\r\nbody until EOF"

    srv = await raw_server(handler)
    async with httpx.AsyncClient(base_url=srv.url, transport=KeepAliveTransport("127.0.0.1", srv.port)) as client:
        response = await client.get("/")
        assert (response.status_code, response.reason_phrase, response.text) == (500, "Oops", "body until EOF")
        assert (await client.get("/")).text == "body until EOF"
    assert len(srv.peers) == 2  # a body ended by EOF ends its connection


async def test_a_cancelled_exchange_never_leaves_its_connection_for_reuse(raw_server) -> None:  # type: ignore[no-untyped-def]
    async def handler(peer: Peer, request: bytes) -> bytes:
        await asyncio.sleep(10)
        return ok()

    srv = await raw_server(handler)
    pool = KeepAlivePool("127.0.0.1", srv.port)
    try:
        task = asyncio.create_task(pool.exchange("GET", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", TIMEOUTS))
        for _ in range(500):
            if srv.peers and srv.peers[0].requests:
                break
            await asyncio.sleep(0.01)
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        assert pool._open == set() and pool._idle == []
    finally:
        pool.close()


async def test_an_expired_idle_connection_is_not_reused(raw_server) -> None:  # type: ignore[no-untyped-def]
    async def handler(peer: Peer, request: bytes) -> bytes:
        return ok()

    srv = await raw_server(handler)
    pool = KeepAlivePool("127.0.0.1", srv.port, keepalive_expiry_s=0.2)
    try:
        await pool.exchange("GET", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", TIMEOUTS)
        await pool.exchange("GET", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", TIMEOUTS)
        assert len(srv.peers) == 1
        await asyncio.sleep(0.3)
        await pool.exchange("GET", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", TIMEOUTS)
        assert len(srv.peers) == 2
    finally:
        pool.close()


async def test_a_connection_the_server_closed_while_idle_is_replaced(raw_server) -> None:  # type: ignore[no-untyped-def]
    async def handler(peer: Peer, request: bytes) -> bytes | None:
        return ok(b"once", b"connection: keep-alive\r\n") if len(peer.requests) == 1 else None

    srv = await raw_server(handler)
    pool = KeepAlivePool("127.0.0.1", srv.port)
    try:
        # Each connection answers one request; the second request on it gets the server closing
        # without a byte of reply: the pool sends it once more on a fresh connection.
        for _ in range(3):
            reply = await pool.exchange("POST", b"POST /step HTTP/1.1\r\nHost: x\r\ncontent-length: 0\r\n\r\n",
                                        TIMEOUTS)
            assert reply.body == b"once"
        assert all(len(p.requests) <= 2 for p in srv.peers)
        assert sum(len(p.requests) == 1 for p in srv.peers) >= 1
    finally:
        pool.close()


async def test_a_fresh_connection_that_fails_is_an_error_not_a_resend(raw_server) -> None:  # type: ignore[no-untyped-def]
    async def handler(peer: Peer, request: bytes) -> None:
        return None  # closes without replying

    srv = await raw_server(handler)
    pool = KeepAlivePool("127.0.0.1", srv.port)
    try:
        with pytest.raises(httpx.RemoteProtocolError, match="without a complete reply"):
            await pool.exchange("POST", b"POST /step HTTP/1.1\r\nHost: x\r\ncontent-length: 0\r\n\r\n", TIMEOUTS)
        assert len(srv.peers) == 1 and len(srv.peers[0].requests) == 1  # sent exactly once
    finally:
        pool.close()


async def test_timeouts_and_refused_connections(raw_server) -> None:  # type: ignore[no-untyped-def]
    async def handler(peer: Peer, request: bytes) -> bytes:
        await asyncio.sleep(10)
        return ok()

    srv = await raw_server(handler)
    pool = KeepAlivePool("127.0.0.1", srv.port)
    try:
        with pytest.raises(httpx.ReadTimeout):
            await pool.exchange("GET", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", {**TIMEOUTS, "read": 0.2})
        assert pool._open == set() and pool._idle == []  # never reused after a timeout
    finally:
        pool.close()
    import socket

    with socket.socket() as sock:  # bound, never listening: connections are refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    refused = KeepAlivePool("127.0.0.1", port)
    with pytest.raises(httpx.ConnectError):
        await refused.exchange("GET", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", TIMEOUTS)
    refused.close()
    with pytest.raises(httpx.ConnectError, match="closed"):
        await refused.exchange("GET", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", TIMEOUTS)
