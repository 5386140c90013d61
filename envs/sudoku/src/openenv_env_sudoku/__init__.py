"""Sudoku: 9x9 puzzles with a unique solution, generated from the seed.

Names are imported on first use: loading the plugin hook module (``openenv_env_sudoku.plugin``),
which imports this package, must not import the env.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.lazy import lazy_exports

if TYPE_CHECKING:
    from openenv_env_sudoku.env import SudokuEnv
    from openenv_env_sudoku.generate import generate_puzzle
    from openenv_env_sudoku.models import SudokuAction, SudokuObservation, SudokuState
    from openenv_env_sudoku.oracle import solve
    from openenv_env_sudoku.solver import count_solutions, solve_grid


__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "SudokuAction": ".models",
    "SudokuEnv": ".env",
    "SudokuObservation": ".models",
    "SudokuState": ".models",
    "count_solutions": ".solver",
    "generate_puzzle": ".generate",
    "solve": ".oracle",
    "solve_grid": ".solver",
})
