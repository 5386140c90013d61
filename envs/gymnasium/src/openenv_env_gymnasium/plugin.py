"""Plugin hooks of openenvkit-env-gymnasium: registers ``gymnasium`` (lazily)."""

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
        "gymnasium", "openenv_env_gymnasium.env:GymnasiumEnv",
        description="Any registered Gymnasium env id (reset env_id=..., default FrozenLake-v1) as JSON.",
        manifest=MANIFEST,
    )
