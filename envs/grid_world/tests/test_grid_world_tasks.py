"""The grid world's declared tasks: one per start cell, train and test starts disjoint."""

from __future__ import annotations

import pytest

from openenv.errors import ValidationError
from openenv.tasks import Task, tasks_of
from openenv_env_grid_world.env import GridWorldEnv


def test_every_free_cell_is_one_task_and_no_start_is_in_both_splits() -> None:
    source = tasks_of(GridWorldEnv)
    assert source is not None
    by_split = {s.name: {tuple(t.data["start"]) for t in source.task_range(s.name)} for s in source.splits()}
    assert set(by_split) == {"train", "test"} and not by_split["train"] & by_split["test"]
    assert len(by_split["train"]) == 15 and len(by_split["test"]) == 4
    assert (0, 0) in by_split["train"] and (4, 4) not in by_split["train"] | by_split["test"]  # S yes, G no


@pytest.mark.parametrize("split", ["train", "test"])
def test_a_task_starts_on_its_cell_whatever_the_seed(split: str) -> None:
    source = tasks_of(GridWorldEnv)
    assert source is not None
    for task in source.task_range(split):
        obs = GridWorldEnv().reset(seed=12345, task=task)
        assert obs.position == task.data["start"] and obs.grid[obs.position[0]][obs.position[1]] == "A"


@pytest.mark.parametrize(("start", "why"), [([1, 1], "a wall"), ([4, 4], "the goal"), ([9, 0], "off the"),
                                            ("0,0", "two integers")])
def test_a_task_with_an_impossible_start_is_refused_saying_why(start: object, why: str) -> None:
    with pytest.raises(ValidationError, match=why):
        GridWorldEnv().reset(task=Task(id="bad", split="train", data={"start": start}))
