"""Plugin hooks of openenvkit-provider-slurm: registers the ``slurm`` provider (lazily)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.hookspecs import hookimpl

if TYPE_CHECKING:
    from openenv.registry import ProviderRegistry

__all__ = ["openenv_register_providers"]


@hookimpl
def openenv_register_providers(registry: ProviderRegistry) -> None:
    registry.register(
        "slurm", "openenv_provider_slurm.provider:SlurmProvider",
        description="Env servers as Slurm batch jobs, reached on 127.0.0.1 (needs sbatch and a cluster).",
    )
