"""Plugin hooks of openenvkit-env-twenty48: registers ``2048`` (lazily)."""

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
        "2048", "openenv_env_twenty48.env:Twenty48Env",
        description="The 2048 sliding-tile game on a 4x4 board; reward = merged tile values; seeded spawns.",
        manifest=MANIFEST,
    )
