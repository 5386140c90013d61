"""Plugin hooks of openenvkit-transport-ws.

Registers the ``ws`` transport with lazy references only: importing this module (as
``openenv plugins list`` does) never imports ``websockets`` or ``starlette``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.hookspecs import hookimpl

if TYPE_CHECKING:
    from openenv.registry import TransportRegistry

__all__ = ["openenv_register_transports"]


@hookimpl
def openenv_register_transports(registry: TransportRegistry) -> None:
    """Register ``ws``: the OpenEnv 0.10 ``/ws`` endpoint and its client connector."""
    registry.register(
        "ws",
        server="openenv_transport_ws.server:WebSocketTransport",
        client="openenv_transport_ws.client:WebSocketConnector",
        description="OpenEnv /ws WebSocket protocol (upstream 0.10 compatible, with hello extensions)",
    )
