"""Sudoku's declared tasks: a task is (clues, seed) and plays exactly that puzzle."""

from __future__ import annotations

import pytest

from openenv.errors import ValidationError
from openenv.tasks import Task, tasks_of
from openenv_env_sudoku.env import SudokuEnv, render
from openenv_env_sudoku.generate import generate_puzzle


def test_the_splits_are_disjoint_seed_ranges_of_36_clue_puzzles() -> None:
    source = tasks_of(SudokuEnv)
    assert source is not None
    assert {s.name: s.num_tasks for s in source.splits()} == {"train": 10_000, "test": 500}
    assert source.get("test-1000000").data == {"clues": 36}


def test_a_task_plays_the_puzzle_of_its_seed_and_clues() -> None:
    task = tasks_of(SudokuEnv).get("test-1000003")  # type: ignore[union-attr]
    obs = SudokuEnv().reset(seed=5, task=task)  # the task's seed wins over the caller's
    puzzle, _ = generate_puzzle(1_000_003, 36)
    assert obs.board == render(puzzle) and obs.empty_cells == 81 - 36


def test_a_task_with_bad_data_is_refused_naming_the_fix() -> None:
    with pytest.raises(ValidationError, match="clues must be an integer"):
        SudokuEnv().reset(task=Task(id="x", split="train", seed=1, data={"clues": 3}))
    with pytest.raises(ValidationError, match=r"openenv\.tasks\.Task"):
        SudokuEnv().reset(task={"id": "x"})
