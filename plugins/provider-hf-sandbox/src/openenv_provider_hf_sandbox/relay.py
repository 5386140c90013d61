"""A loopback relay to one sandbox's proxy URL: the handle's ``base_url``.

Why a relay: the Jobs proxy in front of a sandbox wants the caller's Hugging Face bearer in
``Authorization`` plus the sandbox's ``X-Sandbox-Token`` on every request, and its URL carries a
path prefix (``/v1/proxy/<port>``). OpenEnv's clients, readiness probe and pools send their own
credential in ``Authorization`` and know nothing of either. So every client talks to
``http://127.0.0.1:<relay>`` as to any local server, and the relay

* checks the OpenEnv token itself when the launch asked for one (``Authorization: Bearer`` or
  ``X-OpenEnv-Token``, compared in constant time; 401 otherwise; ``/health`` stays open, as on
  every OpenEnv server): the env server in the sandbox
  runs without one, behind the proxy, whose credentials only the caller holds;
* drops the client's credential and sets the proxy's headers, read fresh for every connection
  (``Sandbox.proxy_headers``: a rotated HF token is picked up);
* forwards the request to the sandbox URL over TLS (through ``HTTPS_PROXY`` when the environment
  names one for that host, as the SDK does) and pipes bytes both ways: a WebSocket upgrade stays
  open, a plain request gets ``Connection: close`` so the next one is rewritten again.

Bounded: a request head over 64 KiB or not sent within 30 s is dropped; the upstream connect
(TLS and proxy included) has ``connect_timeout_s``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import ssl
import threading
import urllib.request
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from openenv.urls import is_loopback

__all__ = ["Relay"]

_HEAD_LIMIT = 64 * 1024
_HEAD_TIMEOUT_S = 30.0
#: Headers the relay owns on the way up: the client's credential, hop-by-hop ones, the host.
_DROPPED = frozenset({"authorization", "x-openenv-token", "x-sandbox-token", "host", "connection",
                      "proxy-authorization", "proxy-connection", "keep-alive"})


class Relay:
    """``Relay(upstream_url, headers, token=...).start()`` → the loopback base URL; ``close()``."""

    def __init__(self, upstream: str, headers: Callable[[], dict[str, str]], *, token: str | None = None,
                 connect_timeout_s: float = 30.0) -> None:
        parts = urlsplit(upstream)
        if parts.scheme != "https" or not parts.hostname:
            raise ValueError(f"the relay forwards to an https:// URL, got {upstream!r}")
        self.host = parts.hostname
        self.port = parts.port or 443
        self.prefix = parts.path.rstrip("/")
        self._headers = headers
        self._token = token
        self._connect_timeout_s = connect_timeout_s
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="openenv-hf-relay", daemon=True)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self.url = ""

    # -- lifecycle --------------------------------------------------------------------------------

    def start(self) -> str:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._accept, "127.0.0.1", 0, limit=_HEAD_LIMIT), self._loop).result(10)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    def close(self) -> None:
        """Stop listening, end every relayed connection, stop the thread. Idempotent."""
        if not self._thread.is_alive():
            return

        async def stop() -> None:
            if self._server is not None:
                self._server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        if not self._loop.is_running():
            self._loop.close()

    # -- one connection ---------------------------------------------------------------------------

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            await self._relay(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError, TimeoutError):
            pass  # a client or upstream that went away: nothing to report to anyone
        finally:
            self._tasks.discard(task)
            writer.close()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _HEAD_TIMEOUT_S)
        lines = head.decode("latin-1").split("\r\n")
        method, target, version = lines[0].split(" ", 2)
        fields = [tuple(part.strip() for part in line.split(":", 1)) for line in lines[1:] if ":" in line]
        # GET /health stays open, as on every OpenEnv server (liveness checks carry no token).
        if self._token is not None and target.split("?", 1)[0] != "/health" and not self._authorized(fields):
            body = json.dumps({"detail": "Missing or invalid token: send Authorization: Bearer <token>",
                               "code": "UNAUTHORIZED"}).encode()
            writer.write(b"HTTP/1.1 401 Unauthorized\r\nContent-Type: application/json\r\n"
                         b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
            await writer.drain()
            return
        upgrade = any(k.lower() == "upgrade" and v.lower() == "websocket" for k, v in fields)
        kept = [(k, v) for k, v in fields if k.lower() not in _DROPPED]
        host = self.host if self.port == 443 else f"{self.host}:{self.port}"
        extra = [("Host", host), *self._headers().items(), ("Connection", "Upgrade" if upgrade else "close")]
        path = self.prefix + (target if target.startswith("/") else "/" + target)
        out = [f"{method} {path} {version}", *(f"{k}: {v}" for k, v in [*kept, *extra]), "", ""]
        up_reader, up_writer = await asyncio.wait_for(self._open(), self._connect_timeout_s)
        try:
            up_writer.write("\r\n".join(out).encode("latin-1"))
            await up_writer.drain()
            pipes = [asyncio.create_task(_pipe(reader, up_writer)), asyncio.create_task(_pipe(up_reader, writer))]
            # Whichever side ends first ends the exchange (a plain request: the upstream closes after
            # its reply; a WebSocket: either peer closes).
            await asyncio.wait(pipes, return_when=asyncio.FIRST_COMPLETED)
            for pipe in pipes:
                pipe.cancel()
            await asyncio.gather(*pipes, return_exceptions=True)
        finally:
            up_writer.close()

    def _authorized(self, fields: list[tuple[str, ...]]) -> bool:
        given = ""
        for key, value in fields:
            name = key.lower()
            if name == "authorization" and value.lower().startswith("bearer "):
                given = value[7:].strip()
            elif name == "x-openenv-token" and not given:
                given = value
        return hmac.compare_digest(given.encode(), str(self._token).encode())

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A TLS connection to the sandbox host, through the environment's proxy for it, if any."""
        context = ssl.create_default_context()
        proxy = None if is_loopback(self.host) else _env_proxy(self.host)
        if proxy is None:
            return await asyncio.open_connection(self.host, self.port, ssl=context, server_hostname=self.host)
        parts = urlsplit(proxy)
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port or 80)
        writer.write(f"CONNECT {self.host}:{self.port} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n\r\n"
                     .encode("latin-1"))
        await writer.drain()
        reply = await reader.readuntil(b"\r\n\r\n")
        status = reply.split(b" ", 2)[1] if reply.count(b" ") >= 1 else b""
        if status != b"200":
            writer.close()
            raise OSError(f"the proxy {proxy} refused CONNECT {self.host}:{self.port}: "
                          f"{reply.splitlines()[0].decode('latin-1', 'replace')}")
        await writer.start_tls(context, server_hostname=self.host)
        return reader, writer


def _env_proxy(host: str) -> str | None:
    """The ``HTTPS_PROXY`` (or ``ALL_PROXY``) the environment names for ``host``, unless ``NO_PROXY``
    exempts it (the standard library's reading of those variables)."""
    if urllib.request.proxy_bypass(host):
        return None
    proxies = urllib.request.getproxies()
    return proxies.get("https") or proxies.get("all")


async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    while True:
        data = await src.read(65536)
        if not data:
            return
        dst.write(data)
        await dst.drain()
