"""Connect Four's declared tasks: the data names the opponent, the seed makes its every draw."""

from __future__ import annotations

from openenv.tasks import Task, tasks_of
from openenv_env_connect4.env import Connect4Env
from openenv_env_connect4.models import Connect4Action


def _game(task: Task, columns: list[int]) -> list[list[str]]:
    env = Connect4Env()
    boards = [env.reset(task=task).board]
    for column in columns:
        obs = env.step(Connect4Action(column=column))
        boards.append(obs.board)
        if obs.done:
            break
    return boards


def test_the_splits_are_disjoint_seed_ranges_against_the_heuristic_opponent() -> None:
    source = tasks_of(Connect4Env)
    assert source is not None
    assert {s.name: s.num_tasks for s in source.splits()} == {"train": 10_000, "test": 500}
    assert source.get("test-1000499").data == {"opponent": "heuristic", "agent_first": True}


def test_a_task_fixes_the_opponents_draws() -> None:
    source = tasks_of(Connect4Env)
    assert source is not None
    columns = [3, 3, 2, 4, 0, 6]
    games = {tuple(map(tuple, _game(source.get(f"train-{seed}"), columns))) for seed in range(8)}
    assert len(games) > 1  # the opponent's random columns depend on the seed ...
    again = _game(source.get("train-5"), columns)
    assert again == _game(source.get("train-5"), columns)  # ... and only on it


def test_a_task_naming_the_other_opponent_and_side_plays_them() -> None:
    env = Connect4Env()
    obs = env.reset(task=Task(id="second", split="train", seed=1, data={"opponent": "random", "agent_first": False}))
    assert obs.piece == "O" and sum(row.count("X") for row in obs.board) == 1
