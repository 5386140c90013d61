"""A backtracking Sudoku solver: bit masks of used digits per row, column and box, and the most
constrained empty cell first.

Grids are 81 integers in reading order, 0 for an empty cell.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

__all__ = ["BOX_OF", "PEERS", "conflicts", "count_solutions", "is_consistent", "random_solution",
           "solve_grid"]

#: Box index (0-8) of each cell.
BOX_OF: tuple[int, ...] = tuple((i // 27) * 3 + (i % 9) // 3 for i in range(81))
#: The 20 cells that share a row, column or box with each cell.
PEERS: tuple[tuple[int, ...], ...] = tuple(
    tuple(j for j in range(81) if j != i and (j // 9 == i // 9 or j % 9 == i % 9 or BOX_OF[j] == BOX_OF[i]))
    for i in range(81)
)
_ALL = 0x3FE  # bits 1..9


def conflicts(grid: Sequence[int], cell: int, digit: int) -> list[int]:
    """The peers of ``cell`` that already hold ``digit``."""
    return [j for j in PEERS[cell] if grid[j] == digit]


def is_consistent(grid: Sequence[int]) -> bool:
    """No digit repeats in a row, column or box."""
    return all(not conflicts(grid, i, d) for i, d in enumerate(grid) if d)


def _masks(grid: Sequence[int]) -> tuple[list[int], list[int], list[int]] | None:
    rows, cols, boxes = [0] * 9, [0] * 9, [0] * 9
    for i, d in enumerate(grid):
        if d:
            bit = 1 << d
            r, c, b = i // 9, i % 9, BOX_OF[i]
            if (rows[r] | cols[c] | boxes[b]) & bit:
                return None
            rows[r] |= bit
            cols[c] |= bit
            boxes[b] |= bit
    return rows, cols, boxes


def _search(grid: list[int], rows: list[int], cols: list[int], boxes: list[int], limit: int,
            found: list[list[int]], rng: random.Random | None) -> None:
    best, best_free, best_count = -1, 0, 10
    for i in range(81):
        if grid[i] == 0:
            free = _ALL & ~(rows[i // 9] | cols[i % 9] | boxes[BOX_OF[i]])
            count = bin(free).count("1")
            if count < best_count:
                best, best_free, best_count = i, free, count
                if count <= 1:
                    break
    if best < 0:
        found.append(grid[:])
        return
    digits = [d for d in range(1, 10) if best_free & (1 << d)]
    if rng is not None:
        rng.shuffle(digits)
    r, c, b = best // 9, best % 9, BOX_OF[best]
    for d in digits:
        bit = 1 << d
        grid[best] = d
        rows[r] |= bit
        cols[c] |= bit
        boxes[b] |= bit
        _search(grid, rows, cols, boxes, limit, found, rng)
        rows[r] &= ~bit
        cols[c] &= ~bit
        boxes[b] &= ~bit
        grid[best] = 0
        if len(found) >= limit:
            return


def _solutions(grid: Sequence[int], limit: int, rng: random.Random | None = None) -> list[list[int]]:
    if len(grid) != 81 or any(not (isinstance(d, int) and 0 <= d <= 9) for d in grid):
        raise ValueError("a grid is 81 integers from 0 (empty) to 9")
    masks = _masks(grid)
    if masks is None:
        return []
    found: list[list[int]] = []
    _search(list(grid), *masks, limit, found, rng)
    return found


def solve_grid(grid: Sequence[int]) -> list[int] | None:
    """A solution of ``grid`` (the first one found), or None when it has none."""
    found = _solutions(grid, 1)
    return found[0] if found else None


def count_solutions(grid: Sequence[int], limit: int = 2) -> int:
    """How many solutions ``grid`` has, counting no further than ``limit``."""
    return len(_solutions(grid, limit))


def random_solution(rng: random.Random) -> list[int]:
    """A complete valid grid, drawn with ``rng``."""
    return _solutions([0] * 81, 1, rng)[0]
