"""Plugin hooks of openenvkit-provider-novita: registers the ``novita`` provider (lazily: no SDK import)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.hookspecs import hookimpl

if TYPE_CHECKING:
    from openenv.registry import Registry

__all__ = ["openenv_register_providers"]


@hookimpl
def openenv_register_providers(registry: Registry) -> None:
    registry.register(
        "novita", "openenv_provider_novita.provider:NovitaProvider",
        description="Env servers in Novita Agent Sandboxes, reached through the sandbox's port host "
                    "(NOVITA_API_KEY).",
    )
