"""Plugin hooks of openenvkit-serve-uvicorn: answers ``openenv_make_server`` with the hardened
uvicorn server (imported only when a server is made, so ``openenv --help`` never loads uvicorn)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from openenv.hookspecs import hookimpl

if TYPE_CHECKING:
    from openenv.context import ServerConfig, ServerContext
    from openenv.serving import HttpServer

__all__ = ["openenv_make_server", "openenv_serve_workers"]


@hookimpl
def openenv_make_server(app: Any, config: ServerConfig, ctx: ServerContext | None, log_level: str) -> HttpServer | None:
    """uvicorn with the connection cap, read-time header limits, WebSocket body budget and
    bounded shutdown (``openenv_serve_uvicorn.server``)."""
    from openenv_serve_uvicorn.server import build_server

    return build_server(app, config, ctx, log_level)


@hookimpl
def openenv_serve_workers(workers: int, serve_args: list[str], config: ServerConfig, max_sessions: int | None,
                          ready_file: str | None, fd: int | None, uds: str | None) -> int:
    """``openenv serve --workers N``: the front process and its N workers (``openenv_serve_uvicorn.workers``)."""
    from openenv_serve_uvicorn.worker_procs import split_capacity
    from openenv_serve_uvicorn.workers import serve_workers

    split_capacity(max_sessions, workers)  # ValueError when the sessions cannot be split: a usage error
    return serve_workers(workers, serve_args=serve_args, prefix=[], host=config.host, port=config.port,
                         max_sessions=max_sessions, token=config.token, ready_file=ready_file, fd=fd, uds=uds,
                         max_header_bytes=config.max_header_bytes, header_timeout_s=config.header_timeout_s,
                         max_connections=config.max_connections)
