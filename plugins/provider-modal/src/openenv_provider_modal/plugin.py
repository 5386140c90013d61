"""Plugin hooks of openenvkit-provider-modal: registers the ``modal`` provider (lazily: no SDK import)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.hookspecs import hookimpl

if TYPE_CHECKING:
    from openenv.registry import Registry

__all__ = ["openenv_register_providers"]


@hookimpl
def openenv_register_providers(registry: Registry) -> None:
    registry.register(
        "modal", "openenv_provider_modal.provider:ModalProvider",
        description="Env servers in Modal sandboxes, reached through encrypted port tunnels "
                    "(MODAL_TOKEN_ID, MODAL_TOKEN_SECRET).",
    )
