"""Plugin hooks of openenvkit-env-mujoco: registers ``mujoco`` (lazily)."""

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
        "mujoco", "openenv_env_mujoco.env:MujocoEnv",
        description="MuJoCo continuous control (Gymnasium's v5 tasks: InvertedPendulum, Hopper, HalfCheetah, ...; "
        "env_id via reset); the task's own reward.",
        manifest=MANIFEST,
    )
