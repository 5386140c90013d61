"""Typed action, observation and state of Sudoku."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from openenv.types import Action, Observation, State

__all__ = ["SudokuAction", "SudokuObservation", "SudokuState"]


class SudokuAction(Action):
    """Write one digit into one empty cell."""

    row: int = Field(ge=0, le=8, description="Row of the cell, 0 (top) to 8")
    col: int = Field(ge=0, le=8, description="Column of the cell, 0 (left) to 8")
    digit: int = Field(ge=1, le=9, description="The digit to write, 1 to 9")


class SudokuObservation(Observation):
    """The board, what the last placement did, and the placements that break no rule."""

    board: list[str] = Field(description="Nine rows of nine characters: digits, '.' for an empty cell")
    empty_cells: int = Field(description="Cells still empty")
    mistakes: int = Field(default=0, description="Refused placements so far")
    mistakes_left: int = Field(description="Refused placements still allowed before the episode fails")
    result: Literal["start", "correct", "conflict", "wrong"] = Field(
        default="start",
        description="The last placement: 'correct' (written), 'conflict' (breaks a row, column or "
        "box rule; not written), 'wrong' (breaks no rule yet but is not the solution; not written)",
    )
    legal_actions: list[dict[str, int]] = Field(
        default_factory=list,
        description="Placements into empty cells that repeat no digit in a row, column or box, as "
        "action dicts ({'row': 0, 'col': 2, 'digit': 4}); empty once done",
    )
    solved: bool = Field(default=False, description="True once every cell holds the solution's digit")
    truncated: bool = Field(default=False, description="Always false: the episode ends solved or failed")


class SudokuState(State):
    """Episode id, step count, the puzzle and the board."""

    puzzle: list[str] = Field(default_factory=list, description="The givens, as the board at reset")
    board: list[str] = Field(default_factory=list, description="The current board")
    clues: int = Field(default=0, description="Number of givens")
    mistakes: int = Field(default=0, description="Refused placements so far")
    solved: bool = Field(default=False, description="Whether the puzzle is solved")
    done: bool = Field(default=False, description="Whether the episode is over")
