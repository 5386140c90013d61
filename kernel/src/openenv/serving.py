"""``serve``: run one env's app on an HTTP server — the listening socket on the configured address,
the ready file providers wait for, and the event loop (``openenv serve`` and the providers' child
processes use it).

Which server runs the app is a decision hook, ``openenv_make_server`` (``openenv.hookspecs``). The
kernel's answer (``trylast``, ``openenv.builtins``) is plain uvicorn with the options below; the
plugin ``openenvkit-serve-uvicorn`` answers with uvicorn hardened against hostile load (the
connection cap and shedding, read-time header limits, WebSocket messages held against the body
budget while read, the forced exit when a shutdown overruns). Those protections subclass uvicorn's
private protocol classes, so they live in that one package, which pins uvicorn's minor version.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from openenv.context import ServerConfig, ServerContext, server_config
from openenv.errors import ConfigError

if TYPE_CHECKING:
    from openenv.plugins import PluginManager

__all__ = ["HttpServer", "PLAIN_UVICORN_OFF", "make_server", "raise_fd_limit", "serve", "uvicorn_options"]

log = logging.getLogger("openenv.server")

#: What plain uvicorn (the kernel's fallback) does not do, as ``serve`` logs it.
PLAIN_UVICORN_OFF = (
    "the connection cap and shedding of silent connections (--max-connections, --header-timeout); "
    "refusing a header block while it is read (headers are still checked once read); WebSocket "
    "messages counted against the body budget while they are read; the forced exit when a "
    "shutdown overruns shutdown_timeout_s")


class HttpServer(Protocol):
    """What ``serve`` drives: uvicorn ``Server``'s serving surface."""

    started: bool
    should_exit: bool

    async def serve(self, sockets: list[socket.socket] | None = None) -> None: ...


def uvicorn_options(config: ServerConfig, log_level: str) -> dict[str, Any]:
    """The ``uvicorn.Config`` keywords every uvicorn-based server applies for ``config`` (public:
    ``openenvkit-serve-uvicorn`` builds on them)."""
    return dict(
        host=config.host, port=config.port, log_level=log_level,
        ws_max_size=config.max_message_bytes,
        ws_ping_interval=config.ping_interval_s, ws_ping_timeout=config.ping_timeout_s,
        ws_per_message_deflate=False, lifespan="on", access_log=False,
        timeout_graceful_shutdown=5,
        h11_max_incomplete_event_size=config.max_header_bytes,  # the request line and headers (h11)
    )


def serve(
    env: Any,
    *,
    config: ServerConfig | None = None,
    ready_file: str | None = None,
    log_level: str = "info",
    listen_fd: int | None = None,
    uds: str | None = None,
    **overrides: Any,
) -> None:
    """Serve ``env`` until interrupted.

    ``port=0`` binds a free port chosen by the OS; the bound port is logged and, with
    ``ready_file``, written there as JSON ``{"host", "port", "pid"}`` once the server accepts
    connections (how providers learn the port without a race). ``listen_fd`` serves on an
    inherited listening TCP socket instead of binding one: it keeps the network namespace it was
    bound in, so a server in a sandbox without network is still reachable where the caller bound it.
    ``uds`` serves on a unix socket at that path (created owner-only, replaced if a stale socket is
    there); the ready file then holds ``{"uds", "pid"}``.
    """
    from openenv.plugins import get_plugin_manager
    from openenv.watchdog import report_process_exits

    cfg = config or server_config(**overrides)
    # Looked up at call time (openenv.server.create_app), so an embedder can substitute the app
    # builder (the benchmark's bare-echo reference does); imported here, as openenv.server imports
    # this module.
    from openenv import server as _server

    app = _server.create_app(env, config=cfg)
    raise_fd_limit()
    served: ServerContext | None = getattr(getattr(app, "state", None), "ctx", None)  # None: not create_app's
    if served is not None:
        report_process_exits(served.env_name)
    pm: PluginManager = served.plugin_manager if served is not None else get_plugin_manager()
    server = make_server(pm, app, cfg, served, log_level)
    _run_server(server, cfg, ready_file, listen_fd, uds)


def make_server(pm: PluginManager, app: Any, config: ServerConfig, ctx: ServerContext | None,
                log_level: str) -> HttpServer:
    """Ask ``openenv_make_server`` for the server; the kernel's plain uvicorn when nobody answers
    (a manager built without the built-in plugin)."""
    server = pm.hook.openenv_make_server(app=app, config=config, ctx=ctx, log_level=log_level)
    if server is None:
        from openenv.builtins import openenv_make_server

        server = openenv_make_server(app, config, ctx, log_level)
    return server  # type: ignore[no-any-return]


def _run_server(server: HttpServer, cfg: ServerConfig, ready_file: str | None, listen_fd: int | None = None,
                uds: str | None = None) -> None:
    import asyncio
    import json

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

    def bind_unix(path: str) -> socket.socket:
        if os.path.exists(path):
            import stat

            if not stat.S_ISSOCK(os.stat(path).st_mode):
                raise ConfigError(f"--uds {path} exists and is not a socket: pick another path.")
            os.unlink(path)  # a stale socket of an earlier server
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)  # owner-only from the start: no window where others may connect
        try:
            sock.bind(path)
        except OSError as exc:
            sock.close()
            raise ConfigError(f"Cannot bind the unix socket {path}: {exc.strerror}.") from None
        finally:
            os.umask(old)
        return sock

    async def main() -> None:
        if uds is not None:
            sock = bind_unix(uds)
        elif listen_fd is not None:
            sock = inherited(listen_fd)
            cfg.host = sock.getsockname()[0]
        else:
            sock = bind()
        port = 0 if uds is not None else sock.getsockname()[1]
        cfg.port = port
        serve_task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started and not serve_task.done():
            await asyncio.sleep(0.01)
        if server.started:
            where: dict[str, Any] = {"uds": uds} if uds is not None else {"host": cfg.host, "port": port}
            if uds is not None:
                log.info("serving on unix socket %s", uds)
            else:
                log.info("serving on http://%s:%d", cfg.host, port)
            if ready_file:
                tmp = ready_file + ".tmp"
                with open(tmp, "w", encoding="utf-8") as f:
                    json.dump({**where, "pid": os.getpid()}, f)
                os.replace(tmp, ready_file)
        await serve_task

    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        runner.run(main())


def raise_fd_limit() -> tuple[int, int] | None:
    """Raise the soft descriptor limit to the hard one (so a flood of connections meets the
    connection cap, not ``EMFILE``); the (old, new) soft limits, or None."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if target <= soft:
        return soft, soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        return soft, soft
    log.info("raised the open-file limit from %d to %d", soft, target)
    return soft, target


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
