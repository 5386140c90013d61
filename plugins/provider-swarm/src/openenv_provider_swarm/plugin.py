"""Plugin hooks of openenvkit-provider-swarm: the ``swarm`` provider (lazy: no Docker SDK import here)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.hookspecs import hookimpl

if TYPE_CHECKING:
    from openenv.registry import ProviderRegistry

__all__ = ["openenv_register_providers"]


@hookimpl
def openenv_register_providers(registry: ProviderRegistry) -> None:
    """Register ``swarm``: env servers as Docker Swarm services with host-mode published ports."""
    registry.register(
        "swarm", "openenv_provider_swarm.provider:SwarmProvider",
        description="Docker Swarm services (host-mode ports, replicas, scale); images from `openenv build`",
    )
