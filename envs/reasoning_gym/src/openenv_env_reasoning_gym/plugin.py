"""Plugin hooks of openenvkit-env-reasoning_gym: registers ``reasoning_gym`` (lazily)."""

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
        "reasoning_gym", "openenv_env_reasoning_gym.env:ReasoningGymEnv",
        description="reasoning-gym tasks by name (reset dataset=...), answers scored by its own verifiers.",
        manifest=MANIFEST,
    )
