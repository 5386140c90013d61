"""OpenSpiel's declared tasks: seeds with the ``random`` opponent; the seed makes its draws."""

from __future__ import annotations

from openenv.tasks import Task, tasks_of
from openenv_env_openspiel.env import OpenSpielEnv
from openenv_env_openspiel.models import OpenSpielAction


def _game(task: Task) -> list[list[int]]:
    env = OpenSpielEnv()
    obs = env.reset(task=task)
    seen = [list(obs.legal_actions)]
    while not obs.done and obs.legal_actions:
        obs = env.step(OpenSpielAction(action=obs.legal_actions[0]))
        seen.append(list(obs.legal_actions))
    return seen


def test_the_splits_are_disjoint_seed_ranges_against_the_random_opponent() -> None:
    source = tasks_of(OpenSpielEnv)
    assert source is not None
    assert {s.name: s.num_tasks for s in source.splits()} == {"train": 10_000, "test": 500}
    assert source.get("train-9999").data == {"opponent": "random"}


def test_a_task_fixes_the_opponents_replies() -> None:
    source = tasks_of(OpenSpielEnv)
    assert source is not None
    assert _game(source.get("test-1000001")) == _game(source.get("test-1000001"))
    assert len({repr(_game(source.get(f"train-{seed}"))) for seed in range(10)}) > 1
