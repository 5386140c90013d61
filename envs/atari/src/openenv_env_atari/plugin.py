"""Plugin hooks of openenvkit-env-atari: registers ``atari`` (lazily)."""

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
        "atari", "openenv_env_atari.env:AtariEnv",
        description="Atari 2600 games through ale-py (game, frame_skip, sticky_actions via reset); "
        "reward is the score delta.",
        manifest=MANIFEST,
    )
