"""The Sudoku oracle: solve the observed board with the backtracking solver and write the first
empty cell's digit. It reads only the observation, as an agent would."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from openenv_env_sudoku.models import SudokuObservation
from openenv_env_sudoku.solver import solve_grid

__all__ = ["solve"]


def solve(obs: SudokuObservation | Mapping[str, Any]) -> dict[str, int]:
    """The next placement, ``{"row": r, "col": c, "digit": d}``; ``ValueError`` when the board is
    full or has no solution."""
    data = obs.model_dump() if isinstance(obs, SudokuObservation) else obs
    grid = [0 if ch == "." else int(ch) for ch in "".join(data["board"])]
    if 0 not in grid:
        raise ValueError("the board is full; nothing to place")
    solution = solve_grid(grid)
    if solution is None:
        raise ValueError("the board has no solution")
    cell = grid.index(0)
    return {"row": cell // 9, "col": cell % 9, "digit": solution[cell]}
