"""Perfect mazes (exactly one path between any two cells) from a seed, by randomised depth-first search.

A maze of ``rows x cols`` cells is drawn on a ``(2*rows+1) x (2*cols+1)`` map: cells sit at odd
coordinates, the squares between them are walls unless a passage was carved. The same seed and size
always give the same maze.
"""

from __future__ import annotations

import random

__all__ = ["MAX_CELLS", "generate_maze"]

#: Largest side, in cells, a maze may have (keeps maps and observations small).
MAX_CELLS = 40


def generate_maze(rows: int, cols: int, seed: int | None = None) -> list[str]:
    """The map of a ``rows x cols``-cell perfect maze: ``#`` walls, ``.`` open squares."""
    for name, value in (("rows", rows), ("cols", cols)):
        if not isinstance(value, int) or isinstance(value, bool) or not 2 <= value <= MAX_CELLS:
            raise ValueError(f"maze {name} must be an integer from 2 to {MAX_CELLS}, got {value!r}")
    rng = random.Random(seed)
    height, width = 2 * rows + 1, 2 * cols + 1
    grid = [["#"] * width for _ in range(height)]
    seen = {(0, 0)}
    stack = [(0, 0)]
    grid[1][1] = "."
    while stack:  # iterative DFS: at most rows*cols pushes, so the loop is bounded
        r, c = stack[-1]
        options = [
            (r + dr, c + dc) for dr, dc in ((-1, 0), (1, 0), (0, -1), (0, 1))
            if 0 <= r + dr < rows and 0 <= c + dc < cols and (r + dr, c + dc) not in seen
        ]
        if not options:
            stack.pop()
            continue
        nr, nc = rng.choice(options)
        grid[2 * nr + 1][2 * nc + 1] = "."
        grid[r + nr + 1][c + nc + 1] = "."  # the wall square between the two cells
        seen.add((nr, nc))
        stack.append((nr, nc))
    return ["".join(row) for row in grid]
