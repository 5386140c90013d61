"""Plugin hooks of openenvkit-provider-local: registers the ``local`` and ``uv`` providers (lazily)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.hookspecs import hookimpl

if TYPE_CHECKING:
    from openenv.registry import ProviderRegistry

__all__ = ["openenv_register_providers"]


@hookimpl
def openenv_register_providers(registry: ProviderRegistry) -> None:
    registry.register(
        "local", "openenv_provider_local.local:LocalProvider",
        description="Env servers as child processes of this Python (127.0.0.1, no Docker).",
    )
    registry.register(
        "uv", "openenv_provider_local.uv:UvProvider",
        description="Env servers in isolated environments built by `uv run` (needs uv).",
    )
