"""Plugin hooks of openenvkit-provider-hf-sandbox: registers the ``hf_sandbox`` provider (lazily: no
SDK import)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.hookspecs import hookimpl

if TYPE_CHECKING:
    from openenv.registry import Registry

__all__ = ["openenv_register_providers"]


@hookimpl
def openenv_register_providers(registry: Registry) -> None:
    registry.register(
        "hf_sandbox", "openenv_provider_hf_sandbox.provider:HFSandboxProvider",
        description="Env servers in Hugging Face Jobs sandboxes, reached through the Jobs proxy (HF_TOKEN).",
    )
