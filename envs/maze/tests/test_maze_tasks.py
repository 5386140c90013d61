"""The maze's declared tasks: a task is (size, seed) and plays exactly that maze."""

from __future__ import annotations

from openenv.tasks import Task, tasks_of
from openenv_env_maze.env import MazeEnv
from openenv_env_maze.generate import generate_maze


def test_the_splits_are_disjoint_seed_ranges_of_six_by_six_mazes() -> None:
    source = tasks_of(MazeEnv)
    assert source is not None
    assert {s.name: s.num_tasks for s in source.splits()} == {"train": 10_000, "test": 500}
    task = source.get("test-1000007")
    assert task.seed == 1_000_007 and task.data == {"size": 6}


def test_a_task_plays_the_maze_of_its_seed_and_size_whatever_seed_the_caller_passes() -> None:
    task = tasks_of(MazeEnv).get("train-42")  # type: ignore[union-attr]
    obs = MazeEnv().reset(seed=999, task=task)
    want = generate_maze(6, 6, 42)
    assert [row.replace("A", ".").replace("E", ".") for row in obs.grid] == want
    assert len(obs.grid) == 13 and obs.position == [1, 1]
    other = MazeEnv().reset(task=tasks_of(MazeEnv).get("train-43"))  # type: ignore[union-attr]
    assert other.grid != obs.grid


def test_a_task_of_another_size_plays_that_size() -> None:
    obs = MazeEnv().reset(task=Task(id="big", split="train", seed=3, data={"size": [4, 9]}))
    assert len(obs.grid) == 9 and len(obs.grid[0]) == 19
