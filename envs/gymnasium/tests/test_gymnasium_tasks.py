"""Gymnasium's declared tasks: seeds of the served env id, each one episode."""

from __future__ import annotations

from typing import Any

from openenv.tasks import Task, tasks_of
from openenv_env_gymnasium.env import GymnasiumEnv
from openenv_env_gymnasium.models import GymAction


def _episode(task: Task, steps: int = 8) -> list[Any]:
    env = GymnasiumEnv(env_id="FrozenLake-v1")
    obs = env.reset(task=task)
    seen = [obs.observation]
    for _ in range(steps):
        obs = env.step(GymAction(action=2))  # always right: where the ice slips depends on the seed
        seen.append((obs.observation, obs.reward, obs.done))
        if obs.done:
            break
    return seen


def test_the_splits_are_disjoint_seed_ranges() -> None:
    source = tasks_of(GymnasiumEnv)
    assert source is not None
    assert {s.name: s.num_tasks for s in source.splits()} == {"train": 10_000, "test": 500}
    assert source.get("test-1000000").seed == 1_000_000


def test_a_task_replays_the_episode_of_its_seed() -> None:
    source = tasks_of(GymnasiumEnv)
    assert source is not None
    assert _episode(source.get("train-3")) == _episode(source.get("train-3"))
    assert len({repr(_episode(source.get(f"train-{seed}"))) for seed in range(10)}) > 1
