"""Plugin hooks of openenvkit-env-wordle: registers ``wordle`` (lazily)."""

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
        "wordle", "openenv_env_wordle.env:WordleEnv",
        description="Guess a five-letter word in six tries from green/yellow/grey feedback; +1.0 for the word.",
        manifest=MANIFEST,
    )
