"""2048's declared tasks: the seed places every tile, so a task and moves replay one game."""

from __future__ import annotations

from openenv.tasks import Task, tasks_of
from openenv_env_twenty48.env import Twenty48Env
from openenv_env_twenty48.models import Twenty48Action


def _play(task: Task, moves: int = 6) -> list[list[list[int]]]:
    env = Twenty48Env()
    obs = env.reset(task=task)
    boards = [obs.board]
    for _ in range(moves):
        obs = env.step(Twenty48Action(move=obs.legal_actions[0]["move"]))
        boards.append(obs.board)
    return boards


def test_the_splits_are_disjoint_seed_ranges_to_2048() -> None:
    source = tasks_of(Twenty48Env)
    assert source is not None
    assert {s.name: s.num_tasks for s in source.splits()} == {"train": 10_000, "test": 500}
    assert source.get("train-0").data == {"target": 2048}


def test_a_task_replays_its_tiles_and_another_task_does_not() -> None:
    source = tasks_of(Twenty48Env)
    assert source is not None
    first = _play(source.get("train-11"))
    assert first == _play(source.get("train-11"))
    assert first != _play(source.get("train-12"))
    assert Twenty48Env().reset(seed=11, target=2048).board == first[0]


def test_a_task_with_its_own_target_plays_to_it() -> None:
    env = Twenty48Env()
    env.reset(task=Task(id="short", split="train", seed=1, data={"target": 64}))
    assert env.state.target == 64
