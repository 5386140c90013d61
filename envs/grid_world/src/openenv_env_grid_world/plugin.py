"""Plugin hooks of openenvkit-env-grid-world: registers ``grid_world`` (lazily)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from openenv.hookspecs import hookimpl

if TYPE_CHECKING:
    from openenv.registry import EnvRegistry

__all__ = ["MANIFEST", "openenv_register_envs"]

#: Absolute path of the env's ``openenv.yaml`` (shipped inside the wheel).
MANIFEST = str(Path(__file__).with_name("openenv.yaml"))


@hookimpl
def openenv_register_envs(registry: EnvRegistry) -> None:
    registry.register(
        "grid_world", "openenv_env_grid_world.env:GridWorldEnv",
        description="A 5x5 grid with walls and a goal; step penalty -0.01, goal +1.0, 50 steps.",
        manifest=MANIFEST,
    )
