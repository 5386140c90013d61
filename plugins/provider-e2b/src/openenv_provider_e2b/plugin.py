"""Plugin hooks of openenvkit-provider-e2b: registers the ``e2b`` provider (lazily: no SDK import)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.hookspecs import hookimpl

if TYPE_CHECKING:
    from openenv.registry import Registry

__all__ = ["openenv_register_providers"]


@hookimpl
def openenv_register_providers(registry: Registry) -> None:
    registry.register(
        "e2b", "openenv_provider_e2b.provider:E2BProvider",
        description="Env servers in E2B sandboxes, reached through the sandbox's port host (E2B_API_KEY).",
    )
