"""Plugin hooks of openenvkit-transport-rest: registers the ``rest`` transport (lazily)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.hookspecs import hookimpl

if TYPE_CHECKING:
    from openenv.registry import Registry

__all__ = ["openenv_register_transports"]


@hookimpl
def openenv_register_transports(registry: Registry) -> None:
    """Register ``rest``: its server routes and the ``http``/``https`` client connector."""
    registry.register(
        "rest",
        "openenv_transport_rest.server:RestTransport",
        client="openenv_transport_rest.client:HttpConnector",
        schemes=["http", "https"],
        description="HTTP with explicit sessions (OpenEnv-Session-Id header) and upstream's "
        "one-shot /reset, /step, /state",
    )
