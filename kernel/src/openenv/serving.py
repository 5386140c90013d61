"""``serve``: run one env's app under uvicorn — the listening socket on the configured address,
the ready file providers wait for, signals, and a bounded shutdown (``openenv serve`` and the
providers' child processes use it)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from openenv.context import ServerConfig, ServerContext
from openenv.errors import ConfigError

__all__ = ["serve"]

log = logging.getLogger("openenv.server")


def serve(
    env: Any,
    *,
    config: ServerConfig | None = None,
    ready_file: str | None = None,
    log_level: str = "info",
    listen_fd: int | None = None,
    **overrides: Any,
) -> None:
    """Serve ``env`` with uvicorn until interrupted.

    ``port=0`` binds a free port chosen by the OS; the bound port is logged and, with
    ``ready_file``, written there as JSON ``{"host", "port", "pid"}`` once the server accepts
    connections (how providers learn the port without a race). ``listen_fd`` serves on an
    inherited listening TCP socket instead of binding one: it keeps the network namespace it was
    bound in, so a server in a sandbox without network is still reachable where the caller bound it.
    """
    import uvicorn
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    from openenv.connections import guarded_protocol, raise_fd_limit
    from openenv.watchdog import report_process_exits

    cfg = config or ServerConfig(**overrides)
    # Looked up at call time (openenv.server.create_app), so an embedder can substitute the app
    # builder (the benchmark's bare-echo reference does); imported here, as openenv.server imports
    # this module.
    from openenv import server as _server

    app = _server.create_app(env, config=cfg)
    raise_fd_limit()
    served = getattr(getattr(app, "state", None), "ctx", None)  # None for an app create_app did not build
    if served is not None:
        report_process_exits(served.env_name)
    uv_config = uvicorn.Config(
        app, host=cfg.host, port=cfg.port, log_level=log_level,
        ws_max_size=cfg.max_message_bytes,
        ws_ping_interval=cfg.ping_interval_s, ws_ping_timeout=cfg.ping_timeout_s,
        ws_per_message_deflate=False, lifespan="on", access_log=False,
        timeout_graceful_shutdown=5,
        h11_max_incomplete_event_size=cfg.max_header_bytes,  # the request line and headers (h11)
        http=guarded_protocol(AutoHTTPProtocol, header_timeout_s=cfg.header_timeout_s,
                              max_connections=cfg.max_connections, max_header_bytes=cfg.max_header_bytes),
        ws=_ws_protocol(served),
    )
    server = uvicorn.Server(uv_config)
    _run_server(server, cfg, ready_file, listen_fd)


def _ws_protocol(served: ServerContext | None) -> Any:
    """uvicorn's WebSocket protocol, wrapped so what it reads counts against the body budget
    (``openenv.wsguard``); ``"auto"`` when it cannot be (another protocol, an app we did not build)."""
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
    from typing import cast

    from openenv.wsguard import guarded_ws_protocol

    return guarded_ws_protocol(cast(Any, sansio), served.body_budget)


def _run_server(server: Any, cfg: ServerConfig, ready_file: str | None, listen_fd: int | None = None) -> None:
    import asyncio
    import json
    import socket

    def inherited(fd: int) -> socket.socket:
        try:
            sock = socket.socket(fileno=fd)
        except OSError as exc:
            raise ConfigError(f"--fd {fd} is not an open socket ({exc.strerror}): pass the number of a "
                              "listening TCP socket this process inherited.") from None
        if sock.type != socket.SOCK_STREAM or sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == 0:
            sock.detach()
            raise ConfigError(f"--fd {fd} is not a listening TCP socket: bind and listen() it before "
                              "passing it down.")
        return sock

    def bind() -> socket.socket:
        # proto=IPPROTO_TCP, not the default 0: asyncio enables TCP_NODELAY only on sockets whose
        # proto says TCP, and without it every small HTTP reply waits ~40 ms (Nagle + delayed ACK).
        sock = socket.socket(socket.AF_INET6 if ":" in cfg.host else socket.AF_INET, socket.SOCK_STREAM,
                             socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((cfg.host, cfg.port))
        except OSError as exc:
            sock.close()
            raise ConfigError(
                f"Cannot bind {cfg.host}:{cfg.port}: {exc.strerror}. Pick another --port, or "
                "--port 0 for a free one."
            ) from None
        sock.set_inheritable(True)
        return sock

    async def main() -> None:
        if listen_fd is not None:
            sock = inherited(listen_fd)
            cfg.host = sock.getsockname()[0]
        else:
            sock = bind()
        port = sock.getsockname()[1]
        cfg.port = port
        serve_task = asyncio.create_task(server.serve(sockets=[sock]))
        stop_watchdog = _shutdown_watchdog(server, cfg)
        while not server.started and not serve_task.done():
            await asyncio.sleep(0.01)
        if server.started:
            log.info("serving on http://%s:%d", cfg.host, port)
            if ready_file:
                tmp = ready_file + ".tmp"
                with open(tmp, "w", encoding="utf-8") as f:
                    json.dump({"host": cfg.host, "port": port, "pid": os.getpid()}, f)
                os.replace(tmp, ready_file)
        try:
            await serve_task
        finally:
            stop_watchdog()

    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        runner.run(main())


def _shutdown_watchdog(server: Any, cfg: ServerConfig) -> Callable[[], None]:
    """Once a shutdown starts, give it ``cfg.shutdown_timeout_s``; then exit the process anyway
    (``128 + signal``, as if the signal had killed it) with a log line naming what was abandoned.

    It watches from a thread of its own, never from the event loop: an inline env that blocks the
    loop would stall a coroutine forever, while uvicorn's signal handler (``signal.signal``, run on
    the main thread between bytecodes) still sets ``server.should_exit``. Returns a ``stop``
    callable for a shutdown that finished in time.
    """
    import signal
    import threading

    done = threading.Event()
    limit = cfg.shutdown_timeout_s

    def force() -> None:
        app = server.config.app
        ctx: ServerContext | None = getattr(app, "openenv_ctx", None)
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


def _loop_factory() -> Callable[[], Any] | None:
    """uvloop's event loop when it is installed, else asyncio's (``None``).

    ``serve`` runs its own loop (to bind the socket itself), so uvicorn's ``loop=`` setting never
    applies here. Measured by ``bench/``: a bare WebSocket echo costs ~35% less CPU per step on
    uvloop + httptools than on asyncio + h11; ``OPENENV_LOOP=asyncio`` opts out.
    """
    if os.environ.get("OPENENV_LOOP", "auto") == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop  # type: ignore[no-any-return]
