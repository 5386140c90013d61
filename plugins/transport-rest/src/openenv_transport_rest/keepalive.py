"""A lean HTTP/1.1 transport for ``httpx``: one keep-alive TCP connection, one write per request.

``httpx``'s default transport (httpcore on anyio) spends most of a small request in its own
machinery and writes the head and the body of every request in two ``send`` calls; on a busy
machine that made a REST step cost 8 ms where the WebSocket client needs under 1 ms.
``KeepAliveTransport`` keeps the ``httpx`` API (requests, responses, timeouts, exceptions) and
replaces the wire part for plain ``http://`` servers:

* Connections are reused (keep-alive). An idle connection is dropped before reuse when the server
  closed it (EOF already seen) or when it has been idle for ``keepalive_expiry`` seconds, below
  uvicorn's default 5 s, so a step after a long think time does not hit a half-closed socket.
  If a reused connection still fails before a single byte of the reply arrived (the server closed
  it at the same moment), the request is sent once more on a fresh connection: a server that
  closes an idle connection has not read the request on it.
* The request line, headers and body go out in one write; the reply is read by
  ``Content-Length``, by chunks, or to EOF (then the connection is not reused).
* Concurrent requests (a cancelled request's clean-up ``DELETE``) each get their own connection.
* Timeouts come from ``httpx``: ``connect`` → ``httpx.ConnectTimeout``, ``write`` →
  ``httpx.WriteTimeout``, ``read`` → ``httpx.ReadTimeout``; socket failures are
  ``httpx.ConnectError`` / ``httpx.ReadError`` / ``httpx.WriteError`` /
  ``httpx.RemoteProtocolError``. A connection in an unknown state (failure, cancellation) is
  closed, never reused.

No TLS and no proxies: ``HttpConnector`` uses it for ``http://`` URLs that no proxy applies to and
``httpx``'s own transport otherwise. ``HttpConnection`` sends its session requests (reset, step,
state, mcp) straight through the pool with a request head built once per connection, which also
skips the ``httpx`` client layer (URL merging, cookies, auth flow) on the step path; the rest
(create, check and delete the session) goes through ``httpx`` on the same pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import httpx

__all__ = ["KeepAlivePool", "KeepAliveTransport", "Reply"]

_MAX_HEAD = 1024 * 1024  # largest response head accepted (status line + headers)
_NO_BODY_STATUS = frozenset({204, 304})


class _Conn:
    __slots__ = ("idle_since", "reader", "writer")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.idle_since = time.monotonic()

    def usable(self, expiry_s: float) -> bool:
        return (not self.writer.is_closing() and not self.reader.at_eof()
                and time.monotonic() - self.idle_since < expiry_s)

    def close(self) -> None:
        self.writer.close()


class _NothingReceived(Exception):
    """A reused connection failed before any byte of the reply: safe to send again."""


class KeepAlivePool:
    """Reused HTTP/1.1 connections to one ``host:port`` (see the module docstring)."""

    def __init__(self, host: str, port: int, *, keepalive_expiry_s: float = 4.0) -> None:
        self.host = host
        self.port = port
        self._expiry = keepalive_expiry_s
        self._idle: list[_Conn] = []
        self._open: set[_Conn] = set()
        self.closed = False

    async def exchange(self, method: str, payload: bytes, timeouts: dict[str, float | None], *,
                       request: httpx.Request | None = None) -> Reply:
        """Send ``payload`` (a whole request: line, headers, body) and read the reply."""
        if self.closed:
            raise httpx.ConnectError("the HTTP connection is closed", request=request)
        conn, reused = await self._checkout(request, timeouts.get("connect"))
        try:
            return await self._exchange(conn, method, payload, timeouts, request, reused=reused)
        except _NothingReceived:
            self._discard(conn)
        except BaseException:
            self._discard(conn)
            raise
        conn, _ = await self._checkout(request, timeouts.get("connect"), fresh=True)
        try:
            return await self._exchange(conn, method, payload, timeouts, request, reused=False)
        except BaseException:
            self._discard(conn)
            raise

    def close(self) -> None:
        self.closed = True
        for conn in list(self._open):
            self._discard(conn)
        self._idle.clear()

    # -- connections ------------------------------------------------------------------------------

    async def _checkout(self, request: httpx.Request | None, timeout: float | None, *,
                        fresh: bool = False) -> tuple[_Conn, bool]:
        while self._idle and not fresh:
            conn = self._idle.pop()
            if conn.usable(self._expiry):
                return conn, True
            self._discard(conn)
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(self.host, self.port, limit=_MAX_HEAD)
        except TimeoutError:
            raise httpx.ConnectTimeout(f"connecting to {self.host}:{self.port} timed out",
                                       request=request) from None
        except OSError as exc:
            raise httpx.ConnectError(f"{type(exc).__name__}: {exc}", request=request) from exc
        conn = _Conn(reader, writer)
        self._open.add(conn)
        return conn, False

    def _checkin(self, conn: _Conn) -> None:
        if self.closed:
            self._discard(conn)
            return
        conn.idle_since = time.monotonic()
        self._idle.append(conn)

    def _discard(self, conn: _Conn) -> None:
        self._open.discard(conn)
        with contextlib.suppress(ValueError):
            self._idle.remove(conn)
        conn.close()

    # -- one exchange -----------------------------------------------------------------------------

    async def _exchange(self, conn: _Conn, method: str, payload: bytes, timeouts: dict[str, float | None],
                        request: httpx.Request | None, *, reused: bool) -> Reply:
        try:
            conn.writer.write(payload)
            async with asyncio.timeout(timeouts.get("write")):
                await conn.writer.drain()
        except TimeoutError:
            raise httpx.WriteTimeout("sending the request timed out", request=request) from None
        except OSError as exc:
            if reused:
                raise _NothingReceived from exc
            raise httpx.WriteError(f"{type(exc).__name__}: {exc}", request=request) from exc
        try:
            async with asyncio.timeout(timeouts.get("read")):
                return await self._read_reply(conn, method, request, reused=reused)
        except TimeoutError:
            raise httpx.ReadTimeout("no reply within the read timeout", request=request) from None

    async def _read_reply(self, conn: _Conn, method: str, request: httpx.Request | None, *,
                          reused: bool) -> Reply:
        reader = conn.reader
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            if reused and not exc.partial:
                raise _NothingReceived from exc
            raise httpx.RemoteProtocolError("the server closed the connection without a complete reply",
                                            request=request) from exc
        except asyncio.LimitOverrunError as exc:
            raise httpx.RemoteProtocolError("the reply's head is too large", request=request) from exc
        except OSError as exc:
            if reused:
                raise _NothingReceived from exc
            raise httpx.ReadError(f"{type(exc).__name__}: {exc}", request=request) from exc
        status, reason, headers, version = _parse_head(head, request)
        values = {k.lower(): v for k, v in headers}
        keep = version == b"HTTP/1.1" and values.get(b"connection", b"").lower() != b"close"
        try:
            if method == "HEAD" or status in _NO_BODY_STATUS or 100 <= status < 200:
                body = b""
            elif values.get(b"transfer-encoding", b"").lower() == b"chunked":
                body = await _read_chunked(reader, request)
            elif b"content-length" in values:
                body = await reader.readexactly(int(values[b"content-length"]))
            else:
                body, keep = await reader.read(), False
        except (asyncio.IncompleteReadError, ValueError) as exc:
            raise httpx.RemoteProtocolError(f"malformed or truncated reply body: {exc}", request=request) from exc
        except OSError as exc:
            raise httpx.ReadError(f"{type(exc).__name__}: {exc}", request=request) from exc
        if keep:
            self._checkin(conn)
        else:
            self._discard(conn)
        return Reply(status, reason, headers, version, body)


class Reply:
    """A complete HTTP reply."""

    __slots__ = ("body", "headers", "reason", "status", "version")

    def __init__(self, status: int, reason: bytes, headers: list[tuple[bytes, bytes]], version: bytes,
                 body: bytes) -> None:
        self.status, self.reason, self.headers, self.version, self.body = status, reason, headers, version, body

    def response(self, request: httpx.Request | None = None) -> httpx.Response:
        return httpx.Response(self.status, headers=self.headers, content=self.body, request=request,
                              extensions={"http_version": self.version, "reason_phrase": self.reason})


class KeepAliveTransport(httpx.AsyncBaseTransport):
    """``httpx`` transport over a ``KeepAlivePool`` (``pool``: shared with direct callers)."""

    def __init__(self, host: str, port: int, *, keepalive_expiry_s: float = 4.0) -> None:
        self.pool = KeepAlivePool(host, port, keepalive_expiry_s=keepalive_expiry_s)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        payload = _encode(request, await request.aread())
        reply = await self.pool.exchange(request.method, payload, request.extensions.get("timeout", {}),
                                         request=request)
        return reply.response(request)

    async def aclose(self) -> None:
        self.pool.close()


def _encode(request: httpx.Request, body: bytes) -> bytes:
    """Request line, headers (as httpx built them: Host, Content-Length, ...) and body, one buffer."""
    parts = [request.method.encode("ascii"), b" ", request.url.raw_path, b" HTTP/1.1\r\n"]
    for name, value in request.headers.raw:
        parts += [name, b": ", value, b"\r\n"]
    parts.append(b"\r\n")
    parts.append(body)
    return b"".join(parts)


def _parse_head(head: bytes, request: httpx.Request | None) -> tuple[int, bytes, list[tuple[bytes, bytes]], bytes]:
    lines = head[:-4].split(b"\r\n")
    try:
        version, code, *rest = lines[0].split(b" ", 2)
        status = int(code)
    except ValueError:
        raise httpx.RemoteProtocolError(f"malformed status line {lines[0][:100]!r}", request=request) from None
    if not version.startswith(b"HTTP/1."):
        raise httpx.RemoteProtocolError(f"not an HTTP/1.x reply: {lines[0][:100]!r}", request=request)
    headers: list[tuple[bytes, bytes]] = []
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep:
            raise httpx.RemoteProtocolError(f"malformed header line {line[:100]!r}", request=request)
        headers.append((name.strip(), value.strip()))
    return status, rest[0] if rest else b"", headers, version


async def _read_chunked(reader: asyncio.StreamReader, request: httpx.Request | None) -> bytes:
    chunks: list[bytes] = []
    while True:
        size_line = await reader.readuntil(b"\r\n")
        size = int(size_line.split(b";", 1)[0].strip(), 16)
        if size == 0:
            while (await reader.readuntil(b"\r\n")) != b"\r\n":  # trailers, then the empty line
                pass
            return b"".join(chunks)
        chunks.append(await reader.readexactly(size))
        if await reader.readexactly(2) != b"\r\n":
            raise httpx.RemoteProtocolError("malformed chunk terminator", request=request)
