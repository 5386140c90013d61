"""A native env with declared tasks (``openenv.tasks.SeedTasks``: 10,000 training seeds and 20
test seeds), served by OUR server as ``numbers``; upstream's request models drive its Task API
routes from upstream's venv.

``openenv serve numbers_env:app`` (with this folder on the path).
"""

from __future__ import annotations

from typing import Any

from openenv.env import Environment
from openenv.server import create_app
from openenv.tasks import SeedTasks, Task
from openenv.types import Action, Observation, State

__all__ = ["Guess", "Numbers", "app"]


class Guess(Action):
    n: int = 0


class Numbers(Environment[Guess, Observation, State]):
    """Guess the seed's last digit; every task is a seed."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    BLOCKING = False
    tasks = SeedTasks({"train": range(0, 10_000), "test": range(1_000_000, 1_000_020)}, config={"digits": 1})

    def reset(self, seed: int | None = None, episode_id: str | None = None, task: Task | None = None,
              **kwargs: Any) -> Observation:
        self._target = (seed or 0) % 10
        return Observation(metadata={"seed": seed})

    def step(self, action: Guess, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        return Observation(done=True, reward=float(action.n == self._target))


app = create_app(Numbers, env_name="numbers")
