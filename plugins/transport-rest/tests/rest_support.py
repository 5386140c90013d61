"""Test support for openenvkit-transport-rest: the kit's echo env recording its calls, a plugin
manager, a server handle (``wait_until`` is the kit's ``wait_until_async``).

(Named uniquely, not ``helpers``, because several packages' tests may share one pytest process.)
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import httpx

import openenv_transport_rest.plugin
from openenv.plugins import PluginManager
from openenv.server import ServerContext
from openenv.testing import EchoAction, EchoObservation
from openenv.testing import EchoEnv as KitEchoEnv
from openenv.testing import wait_until_async as wait_until

__all__ = ["EchoAction", "EchoEnv", "EchoObservation", "Running", "Serve", "bad_factory",
           "make_plugin_manager", "raw_http", "wait_until"]


class EchoEnv(KitEchoEnv):
    """The kit's echo env (``openenv.testing.EchoEnv``) keeping in its state what reached it:
    ``seed`` from ``reset`` and ``last_timeout_s`` from ``step``. ``slow`` waits ``slow_s``."""

    RECORD_CALLS = True
    slow_s: ClassVar[float] = 0.5
    created: ClassVar[int] = 0


def bad_factory() -> EchoEnv:
    raise RuntimeError("no env today")


def make_plugin_manager() -> PluginManager:
    pm = PluginManager(strict=True, entry_points=[])
    pm.register(openenv_transport_rest.plugin, name="rest")
    return pm


@dataclass
class Running:
    """A served app: its base URL and the kernel's ServerContext."""

    url: str
    app: Any

    @property
    def ctx(self) -> ServerContext:
        return self.app.state.ctx  # type: ignore[no-any-return]

    def client(self, **kw: Any) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, trust_env=False, timeout=10.0, **kw)


Serve = Callable[..., Awaitable[Running]]


async def raw_http(url: str, request: bytes, *, close_after_send: bool = False,
                   timeout_s: float = 10.0) -> tuple[int, list[tuple[str, str]], bytes]:
    """Send ``request`` (raw HTTP/1.1 bytes) on a new connection; return status, headers in wire
    order (names lowercased) and body. With ``close_after_send`` the socket is closed right after
    sending and ``(0, [], b"")`` is returned (a client that leaves mid-request)."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), timeout_s)
    try:
        writer.write(request)
        await writer.drain()
        if close_after_send:
            return 0, [], b""
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout_s)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers = [(k.strip().lower(), v.strip()) for k, v in (ln.split(":", 1) for ln in lines[1:] if ln)]
        length = int(dict(headers).get("content-length", "0"))
        body = await asyncio.wait_for(reader.readexactly(length), timeout_s) if length else b""
        return status, headers, body
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
