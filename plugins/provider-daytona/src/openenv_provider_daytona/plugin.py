"""Plugin hooks of openenvkit-provider-daytona: registers the ``daytona`` provider (lazily: no SDK import)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.hookspecs import hookimpl

if TYPE_CHECKING:
    from openenv.registry import Registry

__all__ = ["openenv_register_providers"]


@hookimpl
def openenv_register_providers(registry: Registry) -> None:
    registry.register(
        "daytona", "openenv_provider_daytona.provider:DaytonaProvider",
        description="Env servers in Daytona sandboxes, reached through signed preview URLs "
                    "(DAYTONA_API_KEY).",
    )
