"""The counter environment.

Every promise here is checked by ``openenv.testing.EnvContract`` (see ``tests/``): ``reset``
returns an observation, the same seed gives the same first observation, invalid actions are
refused by ``CountAction``'s field bounds, ``state`` is a ``State``, instances share nothing (so
the class declares ``SUPPORTS_CONCURRENT_SESSIONS``).
"""

from __future__ import annotations

import random
import uuid
from typing import Any

from openenv.env import Environment
from openenv.types import EnvironmentMetadata
from openenv_env_counter.models import CountAction, CountObservation, CountState

__all__ = ["CounterEnv"]


class CounterEnv(Environment[CountAction, CountObservation, CountState]):
    """Add 1-3 per step; reward 1.0 for landing on the target, -1.0 for passing it."""

    #: Instances share no state, so one server may hold many sessions.
    SUPPORTS_CONCURRENT_SESSIONS = True
    #: Steps are cheap pure Python: run them inline on the server's event loop.
    BLOCKING = False

    def __init__(self) -> None:
        super().__init__()
        self._state = CountState(episode_id=str(uuid.uuid4()), step_count=0, value=0, target=10)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> CountObservation:
        target = random.Random(seed).randint(5, 15) if seed is not None else 10
        self._state = CountState(episode_id=episode_id or str(uuid.uuid4()), step_count=0,
                                 value=0, target=target)
        return CountObservation(value=0, target=target, reward=0.0, done=False)

    def step(self, action: CountAction, timeout_s: float | None = None, **kwargs: Any) -> CountObservation:
        state = self._state
        state.step_count += 1
        state.value += action.amount
        done = state.value >= state.target
        reward = (1.0 if state.value == state.target else -1.0) if done else 0.0
        return CountObservation(value=state.value, target=state.target, reward=reward, done=done)

    @property
    def state(self) -> CountState:
        return self._state

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(name="counter", description="Reach the target exactly, 1-3 per step.",
                                   version="0.1.0")
