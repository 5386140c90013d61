"""The client side: a ``ClientConnector`` opening ``/lines`` connections for ``EnvClient``.

``EnvClient("http://127.0.0.1:8000", transport="lines")`` picks it by name (or pass
``connector=LinesConnector()``).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, ClassVar
from urllib.parse import urlsplit, urlunsplit

from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from openenv.errors import SessionLostError
from openenv.interfaces import ClientConnector, Connection, ConnectOptions

__all__ = ["LinesConnection", "LinesConnector"]


def lines_url(base_url: str) -> str:
    """``http(s)://host[:port][/prefix]`` -> ``ws(s)://host[:port][/prefix]/lines``."""
    parts = urlsplit(base_url)
    scheme = {"http": "ws", "https": "wss"}.get(parts.scheme, parts.scheme)
    return urlunsplit((scheme, parts.netloc, parts.path.rstrip("/") + "/lines", "", ""))


class LinesConnection(Connection):
    """One open ``/lines`` connection (one server session)."""

    def __init__(self, ws: ClientConnection, options: ConnectOptions) -> None:
        self._ws = ws
        self._timeout = options.message_timeout_s
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    async def send(self, frame: dict[str, Any]) -> None:
        if self._closed:
            raise SessionLostError("The /lines connection is closed: reset() to start a new session.")
        try:
            await self._ws.send(json.dumps(frame))
        except ConnectionClosed:
            # The server may have answered and hung up first (e.g. a capacity refusal sent on
            # connect): ``receive`` still returns the frames that arrived before the close.
            self._closed = True

    async def receive(self) -> dict[str, Any]:
        try:
            text = await asyncio.wait_for(self._ws.recv(), self._timeout)
        except ConnectionClosed as exc:
            self._closed = True
            raise SessionLostError(f"The /lines connection closed: {exc}") from None
        frame = json.loads(text)
        if not isinstance(frame, dict):
            raise SessionLostError(f"The server sent a frame that is not an object: {frame!r}")
        return frame

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await self._ws.send(json.dumps({"type": "close"}))
        except ConnectionClosed:
            pass
        await self._ws.close()

    async def abort(self) -> None:
        self._closed = True
        self._ws.transport.abort()


class LinesConnector(ClientConnector):
    """Opens ``/lines`` connections."""

    schemes: ClassVar[tuple[str, ...]] = ("http", "https")

    async def connect(self, base_url: str, options: ConnectOptions) -> Connection:
        url = lines_url(base_url)
        try:
            ws = await connect(url, additional_headers=options.headers or None, proxy=None,
                               open_timeout=options.connect_timeout_s, max_size=options.max_message_bytes,
                               compression=None)
        except (OSError, TimeoutError, ValueError) as exc:
            raise ConnectionError(f"Failed to connect to {url}: {exc}") from exc
        except Exception as exc:  # websockets' handshake errors (e.g. 404: no /lines on the server)
            raise ConnectionError(f"Failed to connect to {url}: {type(exc).__name__}: {exc}") from exc
        return LinesConnection(ws, options)
