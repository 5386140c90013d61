"""Plugin hooks of openenvkit-web: registers the server-only ``web`` transport (lazily)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.hookspecs import hookimpl

if TYPE_CHECKING:
    from openenv.registry import TransportRegistry

__all__ = ["openenv_register_transports"]


@hookimpl
def openenv_register_transports(registry: TransportRegistry) -> None:
    """Register ``web``: the ``/web`` page and its ``/web/api`` routes; there is no client side."""
    registry.register(
        "web",
        server="openenv_web.server:WebTransport",
        client=None,
        description="A page at /web to play the env by hand in a browser (one session per tab)",
    )
