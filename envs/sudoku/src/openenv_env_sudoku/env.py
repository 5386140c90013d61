"""Sudoku: a 9x9 puzzle with exactly one solution; write digits into empty cells.

Dynamics (all promises are tested):

* ``reset(seed=k, clues=36)`` generates a puzzle with exactly one solution from
  ``random.Random(k)`` (same seed and clues, same puzzle); ``reset(puzzle="53..7....")`` plays an
  81-character puzzle of your own (digits, ``.`` or ``0`` for empty) if it has exactly one solution;
* a placement of the solution's digit is written and rewarded ``1 / empty cells at reset``, so a
  solved puzzle returns 1.0 in total; the last one ends the episode with ``solved=True``;
* a placement that repeats a digit in its row, column or box (``result="conflict"``), or that breaks
  no rule yet but is not the solution's digit (``result="wrong"``), is **not** written and costs
  ``mistake_penalty`` (-0.1); after ``max_mistakes`` (10) such placements the episode ends, failed;
* writing into a given or filled cell, a step before ``reset()`` or after the end, and a bad
  ``clues``/``puzzle`` raise ``openenv.errors.ValidationError``; a row, column or digit out of range
  is refused by the action model;
* ``legal_actions`` lists the placements into empty cells that break no rule.
* the declared tasks (``openenv.yaml``: ``train`` seeds 0..9 999, ``test`` 1 000 000..1 000 499,
  36 clues) arrive from the server as ``reset(task=<openenv.tasks.Task>)``: the task's seed and clues
  make the puzzle, nothing else.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

from openenv.env import Environment
from openenv.errors import ValidationError
from openenv.tasks import merge_task
from openenv.types import EnvironmentMetadata
from openenv_env_sudoku.generate import DEFAULT_CLUES, MAX_CLUES, MIN_CLUES, generate_puzzle
from openenv_env_sudoku.models import SudokuAction, SudokuObservation, SudokuState
from openenv_env_sudoku.solver import PEERS, conflicts, count_solutions, solve_grid

__all__ = ["SudokuEnv", "parse_puzzle", "render"]


#: A bad action or reset option as one Pydantic-style error (the kernel's helper).
_refuse = ValidationError.of


def render(grid: list[int]) -> list[str]:
    """Nine strings of nine characters, ``.`` for an empty cell."""
    return ["".join(str(d) if d else "." for d in grid[r * 9:(r + 1) * 9]) for r in range(9)]


def parse_puzzle(text: Any) -> list[int]:
    """81 integers from a puzzle string (digits, ``.`` or ``0`` for empty; whitespace ignored) or
    from a list of nine row strings; ``ValidationError`` saying what is wrong."""
    if isinstance(text, list) and all(isinstance(row, str) for row in text):
        text = "".join(text)
    if not isinstance(text, str):
        raise _refuse("puzzle must be a string of 81 characters (digits, '.' or '0' for empty) or "
                      "a list of nine row strings", kind="bad_puzzle", loc=["puzzle"], value=repr(text))
    cells = "".join(text.split())
    bad = sorted({ch for ch in cells if ch not in "0123456789."})
    if len(cells) != 81 or bad:
        raise _refuse(f"puzzle must have 81 cells of digits, '.' or '0'; got {len(cells)} cells"
                      + (f" and the characters {bad}" if bad else ""), kind="bad_puzzle",
                      loc=["puzzle"], value=text)
    return [0 if ch == "." else int(ch) for ch in cells]


class SudokuEnv(Environment[SudokuAction, SudokuObservation, SudokuState]):
    """Sudoku with a unique solution. Instances share nothing."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    #: Snapshots hold the puzzle, its solution, the board, the counters and the last step's result.
    SUPPORTS_SNAPSHOT = True
    # Generating a puzzle takes 5-60 ms of pure Python (more for fewer clues) and a step about 1 ms:
    # too long to hold the event loop, so reset and step run off it.
    BLOCKING = True

    def __init__(self, *, mistake_penalty: float = -0.1, max_mistakes: int = 10) -> None:
        super().__init__()
        if max_mistakes < 1:
            raise ValueError(f"max_mistakes must be at least 1, got {max_mistakes}")
        self.mistake_penalty = mistake_penalty
        self.max_mistakes = max_mistakes
        self._puzzle: list[int] = [0] * 81
        self._solution: list[int] = [0] * 81
        self._grid: list[int] = [0] * 81
        self._blanks = 0
        self._mistakes = 0
        self._steps = 0
        self._done = False
        self._episode_id: str | None = None
        self._last: dict[str, Any] = {"result": "start", "metadata": {}}

    # -- protocol ---------------------------------------------------------------------------------

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> SudokuObservation:
        declared = kwargs.pop("task", None)
        # a declared task (openenv.tasks): its seed and data make the episode
        seed, kwargs = merge_task(declared, seed, kwargs)
        unknown = sorted(set(kwargs) - {"clues", "puzzle"})
        if unknown:
            raise _refuse(f"unknown reset option(s) {unknown}; Sudoku accepts clues and puzzle",
                          kind="unknown_option", loc=unknown[:1])
        if "puzzle" in kwargs:
            puzzle = parse_puzzle(kwargs["puzzle"])
            if count_solutions(puzzle, 2) != 1:
                many = count_solutions(puzzle, 2) == 2
                raise _refuse(f"the puzzle has {'more than one solution' if many else 'no solution'}; "
                              "give one with exactly one", kind="bad_puzzle", loc=["puzzle"])
            solution = solve_grid(puzzle)
            assert solution is not None
        else:
            clues = kwargs.get("clues", DEFAULT_CLUES)
            if not isinstance(clues, int) or isinstance(clues, bool) or not MIN_CLUES <= clues <= MAX_CLUES:
                raise _refuse(f"clues must be an integer from {MIN_CLUES} to {MAX_CLUES}, got {clues!r} "
                              f"(fewer clues, harder puzzles; default {DEFAULT_CLUES})",
                              kind="bad_clues", loc=["clues"], value=clues)
            seed = seed if seed is not None else random.randrange(2**32)
            puzzle, solution = generate_puzzle(seed, clues)
        self._puzzle, self._solution, self._grid = puzzle, solution, puzzle[:]
        self._blanks = puzzle.count(0)
        self._mistakes = 0
        self._steps = 0
        self._done = self._blanks == 0
        self._episode_id = episode_id or str(uuid.uuid4())
        return self._observe(reward=0.0, result="start")

    def step(
        self, action: SudokuAction, timeout_s: float | None = None, **kwargs: Any
    ) -> SudokuObservation:
        if self._episode_id is None:
            raise _refuse("No puzzle in progress: call reset() before step().", kind="no_episode")
        if self._done:
            raise _refuse("The episode is over (solved or out of mistakes): call reset().",
                          kind="episode_over")
        cell = action.row * 9 + action.col
        if self._grid[cell]:
            what = "a given" if self._puzzle[cell] else "already filled"
            raise _refuse(f"cell (row {action.row}, col {action.col}) is {what} ({self._grid[cell]}); "
                          "write into an empty ('.') cell", kind="cell_filled", loc=["row"],
                          value=[action.row, action.col])
        self._steps += 1
        clash = conflicts(self._grid, cell, action.digit)
        if action.digit == self._solution[cell]:
            self._grid[cell] = action.digit
            self._done = 0 not in self._grid
            return self._observe(reward=1.0 / self._blanks, result="correct")
        self._mistakes += 1
        self._done = self._mistakes >= self.max_mistakes
        return self._observe(
            reward=self.mistake_penalty, result="conflict" if clash else "wrong",
            metadata={"conflicts_with": [[j // 9, j % 9] for j in clash]},
        )

    @property
    def state(self) -> SudokuState:
        return SudokuState(
            episode_id=self._episode_id, step_count=self._steps, puzzle=render(self._puzzle),
            board=render(self._grid), clues=81 - self._blanks, mistakes=self._mistakes,
            solved=0 not in self._grid, done=self._done,
        )

    def snapshot(self) -> dict[str, Any]:
        return {"puzzle": self._puzzle, "solution": self._solution, "grid": self._grid, "mistakes": self._mistakes,
                "steps": self._steps, "done": self._done, "episode_id": self._episode_id, "last": self._last}

    def restore(self, data: dict[str, Any]) -> SudokuObservation:
        puzzle, solution, grid = data.get("puzzle"), data.get("solution"), data.get("grid")
        mistakes, steps, done, last = data.get("mistakes"), data.get("steps"), data.get("done"), data.get("last")
        cells = [puzzle, solution, grid]
        if (not all(isinstance(c, list) and len(c) == 81 and all(type(v) is int and 0 <= v <= 9 for v in c)
                    for c in cells)
                or 0 in solution or any(p and p != s for p, s in zip(puzzle, solution, strict=True))  # type: ignore[arg-type,operator]
                or any(g and g != s for g, s in zip(grid, solution, strict=True))  # type: ignore[arg-type,operator]
                or any(p and g != p for p, g in zip(puzzle, grid, strict=True))  # type: ignore[arg-type,operator]
                or type(mistakes) is not int or not 0 <= mistakes <= self.max_mistakes
                or type(steps) is not int or steps < 0 or type(done) is not bool
                or not isinstance(last, dict) or last.get("result") not in ("start", "correct", "wrong", "conflict")
                or not isinstance(last.get("metadata"), dict)):
            raise ValueError("not a sudoku snapshot: puzzle, solution and board must be 81 digits that agree, "
                             "the counters in range")
        self._puzzle, self._solution, self._grid = list(puzzle), list(solution), list(grid)  # type: ignore[arg-type]
        self._blanks = self._puzzle.count(0)
        self._mistakes, self._steps, self._done = mistakes, steps, done
        self._episode_id = str(data.get("episode_id") or uuid.uuid4())
        meta = {k: v for k, v in last["metadata"].items() if k != "step"}
        return self._observe(reward=None, result=str(last["result"]), metadata=meta)

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="sudoku",
            description="9x9 Sudoku with a unique solution generated from the seed; +1.0 in total "
            "for a solved grid, -0.1 per refused placement.",
            version="0.1.0",
        )

    # -- helpers ----------------------------------------------------------------------------------

    def legal_placements(self) -> list[dict[str, int]]:
        """Placements into empty cells that repeat no digit in a row, column or box."""
        if self._done:
            return []
        out: list[dict[str, int]] = []
        for cell in range(81):
            if not self._grid[cell]:
                used = {self._grid[j] for j in PEERS[cell]}
                out.extend({"row": cell // 9, "col": cell % 9, "digit": d} for d in range(1, 10) if d not in used)
        return out

    def _observe(self, *, reward: float | None, result: str,
                 metadata: dict[str, Any] | None = None) -> SudokuObservation:
        self._last = {"result": result, "metadata": dict(metadata or {})}
        solved = 0 not in self._grid
        return SudokuObservation(
            board=render(self._grid), empty_cells=self._grid.count(0), mistakes=self._mistakes,
            mistakes_left=self.max_mistakes - self._mistakes, result=result,  # type: ignore[arg-type]
            legal_actions=self.legal_placements(), solved=solved, reward=reward, done=self._done,
            metadata={"step": self._steps, **(metadata or {})},
        )
