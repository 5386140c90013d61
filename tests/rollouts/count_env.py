"""A tiny env for the rollouts tests: three steps, reward components in the metadata, and on request
a server that dies mid-episode (``COUNT_ENV_CRASH``: ``always``, or a marker file path to die once)."""

from __future__ import annotations

import os
import uuid
from typing import Any

from pydantic import Field

from openenv import Action, Environment, Observation, State


class CountAction(Action):
    n: int = Field(ge=0, le=3, description="How much to add (0..3)")


class CountObservation(Observation):
    total: int = 0
    task: str = ""


class CountEnv(Environment[CountAction, CountObservation, State]):
    SUPPORTS_CONCURRENT_SESSIONS = True
    BLOCKING = False

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> CountObservation:
        self._state = State(episode_id=episode_id or str(uuid.uuid4()))
        self._total = 0
        return CountObservation(total=0, task=str(kwargs.get("task", "")), reward=0.0)

    def step(self, action: CountAction, timeout_s: float | None = None, **kwargs: Any) -> CountObservation:
        self._state.step_count += 1
        crash = os.environ.get("COUNT_ENV_CRASH")
        if crash and self._state.step_count == 2:
            if crash == "always":
                os._exit(3)
            # O_EXCL: with replicas, two servers can reach step 2 at the same moment; only the one
            # that creates the marker dies (an exists() check let both die).
            try:
                fd = os.open(crash, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                pass
            else:
                os.write(fd, b"crashed")
                os.close(fd)
                os._exit(3)
        self._total += action.n
        return CountObservation(total=self._total, reward=action.n / 3, done=self._state.step_count >= 3,
                                metadata={"reward_components": {"size": action.n / 3, "bonus": 1.0}})

    @property
    def state(self) -> State:
        return self._state
