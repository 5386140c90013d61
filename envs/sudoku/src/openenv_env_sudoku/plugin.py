"""Plugin hooks of openenvkit-env-sudoku: registers ``sudoku`` (lazily)."""

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
        "sudoku", "openenv_env_sudoku.env:SudokuEnv",
        description="9x9 Sudoku with a unique solution, generated from the seed; +1.0 in total when solved.",
        manifest=MANIFEST,
    )
