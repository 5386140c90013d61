"""Plugin hooks of openenvkit-transport-rest: registers the ``rest`` transport (lazily)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.hookspecs import hookimpl

if TYPE_CHECKING:
    from openenv.registry import TransportRegistry

__all__ = ["openenv_register_transports"]


@hookimpl
def openenv_register_transports(registry: TransportRegistry) -> None:
    """Register ``rest``: its server routes and the ``http``/``https`` client connector."""
    registry.register(
        "rest",
        server="openenv_transport_rest.server:RestTransport",
        client="openenv_transport_rest.client:HttpConnector",
        description="HTTP with explicit sessions (OpenEnv-Session-Id header) and upstream's "
        "one-shot /reset, /step, /state",
    )
