"""Plugin hooks: registers the ``lines`` transport with lazy references (importing this module
imports neither Starlette nor websockets)."""

from __future__ import annotations

from typing import Any

from openenv.hookspecs import hookimpl

__all__ = ["openenv_register_transports"]

SERVER = "openenv_transport_lines.server:LinesTransport"
CLIENT = "openenv_transport_lines.client:LinesConnector"
DESCRIPTION = "One JSON frame per WebSocket message at /lines (template transport)"


@hookimpl
def openenv_register_transports(registry: Any) -> None:
    registry.register("lines", server=SERVER, client=CLIENT, description=DESCRIPTION)
