"""Plugin hooks of openenvkit-serve-uvicorn: answers ``openenv_make_server`` with the hardened
uvicorn server (imported only when a server is made, so ``openenv --help`` never loads uvicorn)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from openenv.hookspecs import hookimpl

if TYPE_CHECKING:
    from openenv.context import ServerConfig, ServerContext
    from openenv.serving import HttpServer

__all__ = ["openenv_make_server"]


@hookimpl
def openenv_make_server(app: Any, config: ServerConfig, ctx: ServerContext | None, log_level: str) -> HttpServer | None:
    """uvicorn with the connection cap, read-time header limits, WebSocket body budget and
    bounded shutdown (``openenv_serve_uvicorn.server``)."""
    from openenv_serve_uvicorn.server import build_server

    return build_server(app, config, ctx, log_level)
