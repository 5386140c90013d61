"""Plugin hooks of openenvkit-provider-ray: registers the ``ray`` provider (lazily: no Ray import)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.hookspecs import hookimpl

if TYPE_CHECKING:
    from openenv.registry import Registry

__all__ = ["openenv_register_providers"]


@hookimpl
def openenv_register_providers(registry: Registry) -> None:
    registry.register(
        "ray", "openenv_provider_ray.provider:RayProvider",
        description="Env servers as Ray actors on an existing Ray cluster (address=/RAY_ADDRESS) or a "
                    "local one.",
    )
