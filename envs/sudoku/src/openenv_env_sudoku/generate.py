"""Sudoku puzzles with exactly one solution, generated from a seed.

A random complete grid is drawn, then its cells are emptied in a random order, each removal kept
only if the puzzle still has a single solution, until ``clues`` givens are left (or no further cell
can be emptied; a single pass usually gets down to about 24 givens).
"""

from __future__ import annotations

import random

from openenv_env_sudoku.solver import count_solutions, random_solution

__all__ = ["DEFAULT_CLUES", "MAX_CLUES", "MIN_CLUES", "generate_puzzle"]

DEFAULT_CLUES = 36
MIN_CLUES = 17
MAX_CLUES = 80


def generate_puzzle(seed: int | None = None, clues: int = DEFAULT_CLUES) -> tuple[list[int], list[int]]:
    """``(puzzle, solution)``: 81 integers each (0 = empty); the puzzle has exactly one solution."""
    if not isinstance(clues, int) or isinstance(clues, bool) or not MIN_CLUES <= clues <= MAX_CLUES:
        raise ValueError(f"clues must be an integer from {MIN_CLUES} to {MAX_CLUES}, got {clues!r}")
    rng = random.Random(seed)
    solution = random_solution(rng)
    puzzle = solution[:]
    order = list(range(81))
    rng.shuffle(order)
    left = 81
    for cell in order:  # one pass: at most 81 uniqueness checks
        if left <= clues:
            break
        digit, puzzle[cell] = puzzle[cell], 0
        if count_solutions(puzzle, 2) == 1:
            left -= 1
        else:
            puzzle[cell] = digit
    return puzzle, solution
