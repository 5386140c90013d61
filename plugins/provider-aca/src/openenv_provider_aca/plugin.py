"""Plugin hooks of openenvkit-provider-aca: registers the ``aca`` provider (lazily: no SDK import)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.hookspecs import hookimpl

if TYPE_CHECKING:
    from openenv.registry import Registry

__all__ = ["openenv_register_providers"]


@hookimpl
def openenv_register_providers(registry: Registry) -> None:
    registry.register(
        "aca", "openenv_provider_aca.provider:AcaProvider",
        description="Env servers in Azure Container Apps sandboxes "
                    "(AZURE_SUBSCRIPTION_ID, ACA_SANDBOX_GROUP).",
    )
