"""``WalkEnv``: a tiny random walk that supports snapshots (``SUPPORTS_SNAPSHOT``), for tests of
snapshot-aware code (fork, restore, pools) and as the shortest example of ``snapshot``/``restore``.

Each step moves by the action's ``delta`` plus noise drawn from the episode's seeded generator, so
a restored episode matches the original only if the generator's state travelled too. The episode
ends after ``MAX_STEPS`` steps; the reward is the new position divided by 10.
"""

from __future__ import annotations

import random
import uuid
from typing import Any, ClassVar

from pydantic import Field

from openenv.env import Environment
from openenv.snapshots import rng_state, set_rng_state
from openenv.types import Action, Observation, State

__all__ = ["WalkAction", "WalkEnv", "WalkObservation"]


class WalkAction(Action):
    delta: int = Field(ge=-3, le=3, description="Steps to move (noise is added)")


class WalkObservation(Observation):
    position: int = 0
    noise: int = 0


class WalkEnv(Environment[WalkAction, WalkObservation, State]):
    """A seeded random walk (see the module docs)."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    SUPPORTS_SNAPSHOT = True
    BLOCKING = False
    MAX_STEPS: ClassVar[int] = 20

    def __init__(self) -> None:
        super().__init__()
        self._rng = random.Random(0)
        self._position = 0
        self._noise = 0
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> WalkObservation:
        self._rng = random.Random(seed)
        self._position = self._noise = 0
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return WalkObservation(position=0, reward=0.0)

    def step(self, action: WalkAction, timeout_s: float | None = None, **kwargs: Any) -> WalkObservation:  # type: ignore[override]
        self._noise = noise = self._rng.randint(-2, 2)
        self._position += action.delta + noise
        self._state.step_count += 1
        return WalkObservation(position=self._position, noise=noise, reward=self._position / 10,
                               done=self._state.step_count >= self.MAX_STEPS)

    @property
    def state(self) -> State:
        return self._state

    def snapshot(self) -> dict[str, Any]:
        return {"position": self._position, "noise": self._noise, "rng": rng_state(self._rng),
                "episode_id": self._state.episode_id, "step_count": self._state.step_count}

    def restore(self, data: dict[str, Any]) -> WalkObservation:
        position, noise, steps = data.get("position"), data.get("noise"), data.get("step_count")
        if not all(type(v) is int for v in (position, noise, steps)) or not 0 <= steps <= self.MAX_STEPS:  # type: ignore[operator]
            raise ValueError("not a WalkEnv snapshot: position, noise and step_count must be integers")
        set_rng_state(self._rng, data.get("rng"))
        self._position, self._noise = position, noise  # type: ignore[assignment]
        self._state = State(episode_id=str(data.get("episode_id") or uuid.uuid4()), step_count=steps)  # type: ignore[arg-type]
        return WalkObservation(position=self._position, noise=self._noise,
                               done=self._state.step_count >= self.MAX_STEPS)
