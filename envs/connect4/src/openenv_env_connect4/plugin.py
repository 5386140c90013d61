"""Plugin hooks of openenvkit-env-connect4: registers ``connect4`` (lazily)."""

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
        "connect4", "openenv_env_connect4.env:Connect4Env",
        description="Connect Four (7x6) against a built-in random or win/block opponent; win +1, loss -1, draw 0.",
        manifest=MANIFEST,
    )
