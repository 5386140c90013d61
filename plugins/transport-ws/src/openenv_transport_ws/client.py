"""Client side of ``/ws``: a connector that opens one ``Connection`` (= one server session).

Promises:

* URL conversion exactly as upstream's client (docs/protocol.md §8.1): trailing ``/`` stripped,
  ``http``→``ws``, ``https``→``wss``, no scheme → ``ws://``, path prefix kept, ``/ws`` appended.
  A query string in the base URL is refused with ``ValueError`` (upstream mangles it);
  ``ConnectOptions.session_id`` becomes ``?session_id=``.
* Loopback hosts never go through a proxy (per connection; process settings are untouched).
* Failure to connect → ``ConnectionError("Failed to connect to <ws_url>: <reason>")``; an HTTP
  refusal of the upgrade is ``openenv.client_connect.ConnectRefused`` (a ``ConnectionError``)
  whose message names the fix (401: pass ``token=``/set ``OPENENV_TOKEN``; 403/404: no ``/ws``
  route, use ``transport="rest"``).
* ``request`` never leaves the socket desynchronised: on ``message_timeout_s`` the socket is
  aborted and ``StepTimeoutError`` raised (on cancellation it is aborted too). A connection that
  closed raises ``SessionLostError``, but a frame the server sent before closing (a capacity
  refusal) is always read first, even when the send itself failed because the socket had
  already closed.
* Outbound frames larger than the limit (the configured ``max_message_bytes``, or the server's
  smaller advertised one) raise ``ValueError`` locally instead of killing the session (B20).
* ``close()`` returns once the server has ended the session (bounded wait), so the slot is free
  for the next connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import socket
from typing import Any
from urllib.parse import quote, urlsplit

from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.protocol import State

from openenv.client_connect import refused
from openenv.errors import ProtocolError, SessionLostError, StepTimeoutError
from openenv.images import join_images
from openenv.interfaces import ClientConnector, Connection, ConnectOptions
from openenv.protocol import EXT_BINARY_IMAGES, T_CLOSE, T_HELLO
from openenv.urls import is_loopback, ws_base_url
from openenv.wire import JSONDecodeError, dumps, loads

__all__ = ["WebSocketConnection", "WebSocketConnector", "is_loopback", "ws_url"]

# `proxy=` arrived in websockets 15; older versions never used proxies anyway.
_HAS_PROXY_ARG = "proxy" in inspect.signature(ws_connect.__init__).parameters
_CLOSE_FRAME = dumps({"type": T_CLOSE})
#: How long ``close()`` waits for the server to end the session before closing anyway.
_CLOSE_WAIT_S = 10.0


def ws_url(base_url: str, session_id: str | None = None) -> str:
    """The ``/ws`` URL of the env served at ``base_url`` (docs/protocol.md §8.1)."""
    if "?" in base_url or "#" in base_url:
        raise ValueError(
            f"Base URL {base_url!r} contains a query string or fragment; pass the server's base "
            "URL only (e.g. 'http://host:8000' or 'https://host/prefix'). To attach to a session "
            "use the session_id option instead of '?session_id='."
        )
    out = ws_base_url(base_url) + "/ws"
    if session_id:
        out += "?session_id=" + quote(session_id, safe="")
    return out


class WebSocketConnector(ClientConnector):
    """Opens ``/ws`` connections with the ``websockets`` client."""

    schemes = ("ws", "wss", "http", "https")

    async def connect(self, base_url: str, options: ConnectOptions) -> Connection:
        url = ws_url(base_url, options.session_id)
        kwargs: dict[str, Any] = {
            "additional_headers": dict(options.headers) or None,
            "open_timeout": options.connect_timeout_s,
            "max_size": options.max_message_bytes,
            "ping_interval": options.ping_interval_s,
            "ping_timeout": options.ping_timeout_s,
            "compression": None,
        }
        if _HAS_PROXY_ARG and is_loopback(urlsplit(url).hostname):
            kwargs["proxy"] = None
        try:
            ws = await ws_connect(url, **kwargs)
        except InvalidStatus as exc:  # the server answered the upgrade with an HTTP error
            raise refused(url, exc.response.status_code, transport="ws") from exc
        except Exception as exc:  # refused, DNS, handshake status, timeout, bad URI…
            reason = str(exc) or type(exc).__name__
            raise ConnectionError(f"Failed to connect to {url}: {reason}") from exc
        return WebSocketConnection(ws, url, options)


class WebSocketConnection(Connection):
    """One open ``/ws`` connection. Frames are dicts; replies come back in order."""

    def __init__(self, ws: ClientConnection, url: str, options: ConnectOptions) -> None:
        self._ws = ws
        self.url = url
        self._options = options
        self._closed = False
        self._limit = options.max_message_bytes
        #: ``max_message_bytes`` the server advertised in its ``hello`` reply, once seen.
        self.server_max_message_bytes: int | None = None

    @property
    def closed(self) -> bool:
        return self._closed or self._ws.state is not State.OPEN

    @property
    def max_outbound_bytes(self) -> int:
        """The largest frame ``send`` accepts."""
        server = self.server_max_message_bytes
        return self._limit if server is None else min(self._limit, server)

    async def send(self, frame: dict[str, Any]) -> None:
        if self._options.binary_images and frame.get("type") == T_HELLO:
            # Every hello re-grants the whole set: keep asking, so a later hello (the client's own,
            # for step_batch) does not take binary frames away while the reader expects them.
            data = dict(frame.get("data") or {})
            data["want"] = [*data.get("want", []), EXT_BINARY_IMAGES]
            frame = {**frame, "data": data}
        text = dumps(frame)
        limit = self.max_outbound_bytes
        if len(text) > limit // 4:  # characters <= bytes <= 4 * characters
            size = len(text.encode("utf-8", "surrogatepass"))
            if size > limit:
                raise ValueError(
                    f"Frame of {size} bytes exceeds the limit of {limit} bytes (the server would "
                    "close the connection with 1009); send less data per frame, or raise "
                    "max_message_bytes on both ends."
                )
        try:
            await self._ws.send(text)
        except ConnectionClosed as exc:
            raise self._lost(exc) from exc

    async def receive(self) -> dict[str, Any]:
        try:
            raw = await self._ws.recv()
        except ConnectionClosed as exc:
            raise self._lost(exc) from exc
        try:
            frame = loads(raw)
        except JSONDecodeError as exc:
            raise ProtocolError(f"Server sent invalid JSON: {exc}", code="PROTOCOL_ERROR") from None
        if type(frame) is not dict:
            raise ProtocolError(f"Server sent a non-object frame: {str(raw)[:200]}",
                                code="PROTOCOL_ERROR")
        if self._options.binary_images and "binary" in frame:
            await self._join_binary(frame)
        if frame.get("type") == T_HELLO:
            data = frame.get("data")
            size = data.get("max_message_bytes") if isinstance(data, dict) else None
            if isinstance(size, int) and not isinstance(size, bool) and size > 0:
                self.server_max_message_bytes = size
        return frame

    async def _join_binary(self, frame: dict[str, Any]) -> None:
        """Read the binary frames an observation frame announced (``"binary": n``) and put its images
        back as data URLs, so callers see the frame an image-less connection would have got."""
        count = frame.get("binary")
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise ProtocolError(f"Malformed binary frame count {count!r}: a positive integer expected",
                                code="PROTOCOL_ERROR")
        blobs: list[bytes] = []
        for _ in range(count):
            try:
                raw = await self._ws.recv()
            except ConnectionClosed as exc:
                raise self._lost(exc) from exc
            if not isinstance(raw, bytes):
                raise ProtocolError(f"Expected binary frame {len(blobs) + 1} of {count}, got text: "
                                    f"{str(raw)[:200]}", code="PROTOCOL_ERROR")
            blobs.append(raw)
        try:
            join_images(frame, blobs)
        except ValueError as exc:
            raise ProtocolError(f"Malformed binary images: {exc}", code="PROTOCOL_ERROR") from None

    async def request(self, frame: dict[str, Any]) -> dict[str, Any]:
        timeout = self._options.message_timeout_s
        try:
            async with asyncio.timeout(timeout) as deadline:
                try:
                    await self.send(frame)
                except SessionLostError as lost:
                    # The server may have refused the session (capacity, attach) and closed
                    # before our frame went out: its error frame is still queued; read it.
                    try:
                        return await self.receive()
                    except SessionLostError:
                        raise lost from None
                return await self.receive()
        except asyncio.CancelledError:
            # The reply may still come; it must never be read as the answer to a later request.
            self._abort_now()
            raise
        except TimeoutError:
            if not deadline.expired():
                raise
            # Dropping the socket is the only way to never read this reply as the next one's.
            self._abort_now()
            raise StepTimeoutError(
                f"No reply to {frame.get('type', '?')!r} within {timeout} s; the connection was "
                "dropped and its session is lost. Call reset() to start a new session, or raise "
                "message_timeout_s.",
                data={"timeout_s": timeout},
            ) from None

    async def close(self) -> None:
        """Send ``{"type":"close"}``, wait (bounded) for the server to end the session, close."""
        if self._closed:
            return
        self._closed = True
        ws = self._ws
        try:
            if ws.state is State.OPEN:
                await ws.send(_CLOSE_FRAME)
                # The server closes the env and frees the slot, then closes the socket. Waiting
                # for that means a reconnect right after close() never finds the old slot taken.
                try:
                    async with asyncio.timeout(_CLOSE_WAIT_S):
                        await ws.wait_closed()
                except TimeoutError:
                    pass
            await ws.close()
        except (ConnectionClosed, OSError):
            pass

    async def abort(self) -> None:
        self._abort_now()

    def _abort_now(self) -> None:
        self._closed = True
        transport = getattr(self._ws, "transport", None)
        if transport is not None and not transport.is_closing():
            transport.abort()

    def discard(self) -> None:
        """Shut the TCP connection down through a duplicate of its descriptor: the loop that owns
        the transport may be closed, so ``transport.abort()`` (which schedules on it) cannot be
        used; ``shutdown`` acts on the connection itself, and the server sees it end at once."""
        self._closed = True
        transport = getattr(self._ws, "transport", None)
        sock = transport.get_extra_info("socket") if transport is not None else None
        if sock is None:
            return
        with contextlib.suppress(OSError, ValueError):
            dup = socket.socket(fileno=os.dup(sock.fileno()))
            try:
                dup.shutdown(socket.SHUT_RDWR)
            finally:
                dup.close()

    def _lost(self, exc: ConnectionClosed) -> SessionLostError:
        self._closed = True
        rcvd = exc.rcvd
        code = rcvd.code if rcvd is not None else None
        reason = rcvd.reason if rcvd is not None else ""
        how = f"closed by the server (code {code}{': ' + reason if reason else ''})" \
            if code is not None else "lost"
        return SessionLostError(
            f"Connection to {self.url} {how}; the session and its episode are gone. Call reset() "
            "to start a new session.",
            data={"close_code": code, "close_reason": reason},
        )
