"""2048's board rules: slide and merge, legal moves, seeded tile spawns.

A board is a list of rows of integers (0 for an empty square). A move slides every tile as far as
it goes in one direction; two equal tiles that meet merge into one of twice the value, and a tile
made by a merge does not merge again in the same move, so ``[2, 2, 2, 2]`` slid left is
``[4, 4, 0, 0]`` and ``[4, 4, 8, 0]`` is ``[8, 8, 0, 0]``. The score of a move is the sum of the
merged tiles.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Literal

__all__ = ["MOVES", "Grid", "Move", "can_move", "legal_moves", "move", "slide_row", "spawn"]

Move = Literal["up", "down", "left", "right"]
#: Every move, in a fixed order (``legal_actions`` keeps this order).
MOVES: tuple[Move, ...] = ("up", "down", "left", "right")
Grid = list[list[int]]


def slide_row(row: Sequence[int]) -> tuple[list[int], int]:
    """``row`` slid towards index 0, with merges; returns the new row and the points scored."""
    tiles = [v for v in row if v]
    out: list[int] = []
    score = 0
    i = 0
    while i < len(tiles):
        if i + 1 < len(tiles) and tiles[i] == tiles[i + 1]:
            out.append(2 * tiles[i])
            score += 2 * tiles[i]
            i += 2
        else:
            out.append(tiles[i])
            i += 1
    return out + [0] * (len(row) - len(out)), score


def _transpose(grid: Grid) -> Grid:
    return [list(col) for col in zip(*grid, strict=True)]


def move(grid: Grid, direction: Move) -> tuple[Grid, int]:
    """The board after sliding every tile in ``direction``, and the points scored."""
    if direction in ("up", "down"):
        grid = _transpose(grid)
    reverse = direction in ("right", "down")
    rows: Grid = []
    score = 0
    for row in grid:
        slid, points = slide_row(row[::-1] if reverse else row)
        rows.append(slid[::-1] if reverse else slid)
        score += points
    if direction in ("up", "down"):
        rows = _transpose(rows)
    return rows, score


def can_move(grid: Grid, direction: Move) -> bool:
    """Whether ``direction`` changes the board (a move that changes nothing is not allowed)."""
    return move(grid, direction)[0] != grid


def legal_moves(grid: Grid) -> list[Move]:
    return [m for m in MOVES if can_move(grid, m)]


def spawn(grid: Grid, rng: random.Random, four_probability: float = 0.1) -> tuple[int, int, int] | None:
    """Put a 2 (or, with ``four_probability``, a 4) on a random empty square, in place; returns
    ``(row, col, value)``, or None when the board is full."""
    empty = [(r, c) for r, row in enumerate(grid) for c, v in enumerate(row) if v == 0]
    if not empty:
        return None
    r, c = rng.choice(empty)
    value = 4 if rng.random() < four_probability else 2
    grid[r][c] = value
    return r, c, value
