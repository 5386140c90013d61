"""Plugin hooks of openenvkit-provider-bwrap: registers the ``bwrap`` provider (lazily)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.hookspecs import hookimpl

if TYPE_CHECKING:
    from openenv.registry import ProviderRegistry

__all__ = ["openenv_register_providers"]


@hookimpl
def openenv_register_providers(registry: ProviderRegistry) -> None:
    registry.register(
        "bwrap", "openenv_provider_bwrap.provider:BwrapProvider",
        description="Env servers in rootless bubblewrap sandboxes: read-only root, no network (needs bwrap).",
    )
