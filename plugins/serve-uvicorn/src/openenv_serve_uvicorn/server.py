"""The hardened uvicorn server ``openenv serve`` runs when this package is installed.

* HTTP: uvicorn's auto protocol wrapped by ``openenv_serve_uvicorn.connections`` (connection cap
  and shedding, header timeout, header bytes counted while they are read).
* WebSocket: uvicorn's websockets-sansio protocol wrapped by ``openenv_serve_uvicorn.wsguard``
  (messages held against the body budget from their first byte).
* Shutdown: once a shutdown starts it gets ``shutdown_timeout_s``; then the process exits anyway.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import threading
from collections.abc import Callable
from typing import Any, cast

import uvicorn

from openenv.context import ServerConfig, ServerContext
from openenv.serving import uvicorn_options
from openenv_serve_uvicorn.connections import guarded_protocol
from openenv_serve_uvicorn.wsguard import guarded_ws_protocol

__all__ = ["HardenedServer", "build_server"]

log = logging.getLogger("openenv.server")


def build_server(app: Any, config: ServerConfig, ctx: ServerContext | None, log_level: str) -> HardenedServer:
    """The hardened server for ``app`` (``ctx``: its context, ``None`` for an app we did not build)."""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    uv_config = uvicorn.Config(
        app, **uvicorn_options(config, log_level),
        http=guarded_protocol(AutoHTTPProtocol, header_timeout_s=config.header_timeout_s,
                              max_connections=config.max_connections, max_header_bytes=config.max_header_bytes),
        ws=_ws_protocol(ctx),
    )
    return HardenedServer(uv_config, shutdown_timeout_s=config.shutdown_timeout_s)


def _ws_protocol(served: ServerContext | None) -> Any:
    """uvicorn's WebSocket protocol, wrapped so what it reads counts against the body budget;
    ``"auto"`` when it cannot be (another protocol, an app we did not build)."""
    sansio: Any = None
    try:
        from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol

        sansio = WebSocketsSansIOProtocol
    except ImportError:
        pass
    from uvicorn.protocols.websockets.auto import AutoWebSocketsProtocol

    if served is None or AutoWebSocketsProtocol is None:
        return "auto"
    if sansio is None or AutoWebSocketsProtocol is not sansio:
        log.warning("WebSocket messages are not counted against the body budget while they are read: "
                    "uvicorn's WebSocket protocol here is %s, not websockets-sansio (install websockets>=13)",
                    getattr(AutoWebSocketsProtocol, "__name__", AutoWebSocketsProtocol))
        return "auto"
    return guarded_ws_protocol(cast(Any, sansio), served.body_budget)


class HardenedServer(uvicorn.Server):
    """uvicorn's ``Server`` whose shutdown is bounded (``shutdown_timeout_s``; ``None``: unbounded)."""

    def __init__(self, config: uvicorn.Config, *, shutdown_timeout_s: float | None) -> None:
        super().__init__(config)
        self.shutdown_timeout_s = shutdown_timeout_s

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        stop_watchdog = _shutdown_watchdog(self, self.shutdown_timeout_s)
        try:
            await super().serve(sockets=sockets)
        finally:
            stop_watchdog()


def _shutdown_watchdog(server: uvicorn.Server, limit: float | None) -> Callable[[], None]:
    """Once a shutdown starts, give it ``limit`` seconds; then exit the process anyway
    (``128 + signal``, as if the signal had killed it) with a log line naming what was abandoned.

    It watches from a thread of its own, never from the event loop: an inline env that blocks the
    loop would stall a coroutine forever, while uvicorn's signal handler (``signal.signal``, run on
    the main thread between bytecodes) still sets ``server.should_exit``. Returns a ``stop``
    callable for a shutdown that finished in time.
    """
    done = threading.Event()

    def force() -> None:
        app = server.config.app
        ctx: ServerContext | None = getattr(app, "openenv_ctx", None)
        # uvicorn records the signals it caught (private; named in tests/test_uvicorn_surface.py).
        sigs = getattr(server, "_captured_signals", None) or [signal.SIGTERM]
        stuck = [] if ctx is None else [
            f"session {s.id} (env {ctx.env_name}, {s.step_count} steps"
            f"{', a call running' if s._lock.locked() else ''})" for s in ctx.sessions.sessions()]
        busy = [t.name for t in threading.enumerate() if t.name.startswith("openenv-session-")]
        log.error("shutdown did not finish within %.0f s; exiting anyway. Abandoned: %s; env threads: %s",
                  limit, "; ".join(stuck) or "no session", ", ".join(busy) or "none")
        for h in logging.getLogger().handlers + log.handlers:
            h.flush()
        os._exit(128 + int(sigs[-1]))

    def watch() -> None:
        while not server.should_exit:
            if done.wait(0.1):
                return
        if limit is not None and not done.wait(limit):
            force()

    threading.Thread(target=watch, name="openenv-shutdown-watchdog", daemon=True).start()
    return done.set
