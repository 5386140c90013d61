"""Plugin hooks: registers the ``spawn`` provider (a lazy reference)."""

from __future__ import annotations

from typing import Any

from openenv.hookspecs import hookimpl

__all__ = ["openenv_register_providers"]


@hookimpl
def openenv_register_providers(registry: Any) -> None:
    registry.register("spawn", "openenv_provider_spawn.provider:SpawnProvider",
                      description="Env servers as child processes of this Python (template provider).")
