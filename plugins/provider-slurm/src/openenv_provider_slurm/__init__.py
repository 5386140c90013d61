"""The ``slurm`` provider: env servers as Slurm batch jobs. Import the provider from
``openenv_provider_slurm.provider``; this package imports nothing heavy on its own."""

from __future__ import annotations

__all__: list[str] = []
