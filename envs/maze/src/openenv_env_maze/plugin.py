"""Plugin hooks of openenvkit-env-maze: registers ``maze`` (lazily)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from openenv.hookspecs import hookimpl

if TYPE_CHECKING:
    from openenv.registry import Registry

__all__ = ["MANIFEST", "openenv_register_envs"]

#: Absolute path of the env's ``openenv.yaml`` (shipped inside the wheel).
MANIFEST = str(Path(__file__).with_name("openenv.yaml"))


@hookimpl
def openenv_register_envs(registry: Registry) -> None:
    registry.register(
        "maze", "openenv_env_maze.env:MazeEnv",
        description="A generated maze (size via reset(size=...)); step penalty -0.01, exit +1.0.",
        manifest=MANIFEST,
    )
