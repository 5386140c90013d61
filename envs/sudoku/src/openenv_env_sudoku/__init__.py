"""Sudoku: 9x9 puzzles with a unique solution, generated from the seed.

Names are imported on first use: loading the plugin hook module (``openenv_env_sudoku.plugin``),
which imports this package, must not import the env.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from openenv_env_sudoku.env import SudokuEnv
    from openenv_env_sudoku.generate import generate_puzzle
    from openenv_env_sudoku.models import SudokuAction, SudokuObservation, SudokuState
    from openenv_env_sudoku.oracle import solve
    from openenv_env_sudoku.solver import count_solutions, solve_grid

__all__ = [
    "SudokuAction",
    "SudokuEnv",
    "SudokuObservation",
    "SudokuState",
    "count_solutions",
    "generate_puzzle",
    "solve",
    "solve_grid",
]

_EXPORTS = {
    "SudokuAction": "openenv_env_sudoku.models",
    "SudokuEnv": "openenv_env_sudoku.env",
    "SudokuObservation": "openenv_env_sudoku.models",
    "SudokuState": "openenv_env_sudoku.models",
    "count_solutions": "openenv_env_sudoku.solver",
    "generate_puzzle": "openenv_env_sudoku.generate",
    "solve": "openenv_env_sudoku.oracle",
    "solve_grid": "openenv_env_sudoku.solver",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'openenv_env_sudoku' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
