"""Baseline policies for 2048.

* ``greedy_move(obs)`` — try each legal move and keep the one whose board is worth most, by a
  weighted sum that rewards big tiles laid out in a snake from the top-left corner (so merges keep
  coming). One move ahead; it ignores where the new tile will fall.
* ``lookahead_move(obs)`` — the same board value, one step deeper: for each move, the average over
  every square the new 2 may fall on of the best greedy reply. About a hundred times the work of
  ``greedy_move`` and much stronger: on seeded games it usually builds the 2048 tile.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from openenv_env_twenty48.board import Grid, Move, legal_moves, move
from openenv_env_twenty48.models import Twenty48Observation

__all__ = ["WEIGHTS", "board_value", "greedy_move", "lookahead_move"]

#: Square weights: a snake from the top-left corner (row 0 left to right, row 1 right to left, ...).
WEIGHTS: tuple[tuple[int, ...], ...] = (
    (4**15, 4**14, 4**13, 4**12),
    (4**8, 4**9, 4**10, 4**11),
    (4**7, 4**6, 4**5, 4**4),
    (4**0, 4**1, 4**2, 4**3),
)


def board_value(grid: Grid) -> int:
    """Higher is better: each tile times its square's weight."""
    return sum(w * v for wrow, row in zip(WEIGHTS, grid, strict=True) for w, v in zip(wrow, row, strict=True))


def _grid(obs: Twenty48Observation | Mapping[str, Any]) -> Grid:
    data = obs.model_dump() if isinstance(obs, Twenty48Observation) else obs
    grid: Grid = [list(row) for row in data["board"]]
    return grid


def _moves(grid: Grid) -> list[Move]:
    options = legal_moves(grid)
    if not options:
        raise ValueError("no move changes the board; the game is over")
    return options


def greedy_move(obs: Twenty48Observation | Mapping[str, Any]) -> dict[str, str]:
    """The greedy baseline's move for an observation (or its dict): ``{"move": ...}``."""
    grid = _grid(obs)
    return {"move": max(_moves(grid), key=lambda m: board_value(move(grid, m)[0]))}


def _expected(grid: Grid, direction: Move) -> float:
    after, _ = move(grid, direction)
    empty = [(r, c) for r, row in enumerate(after) for c, v in enumerate(row) if v == 0]
    if not empty:
        return float(board_value(after))
    total = 0.0
    for r, c in empty:
        after[r][c] = 2
        replies = [board_value(move(after, m)[0]) for m in legal_moves(after)]
        total += max(replies) if replies else 0
        after[r][c] = 0
    return total / len(empty)


def lookahead_move(obs: Twenty48Observation | Mapping[str, Any]) -> dict[str, str]:
    """The two-step baseline's move for an observation (or its dict): ``{"move": ...}``."""
    grid = _grid(obs)
    return {"move": max(_moves(grid), key=lambda m: _expected(grid, m))}
