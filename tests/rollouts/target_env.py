"""An env with tasks for the eval tests: one step; the reward is 1 when the action hits the task's
target. Train and test splits, ids ``train-<i>`` / ``test-<i>``, targets ``i % 4``."""

from __future__ import annotations

import uuid
from typing import Any

from pydantic import Field

from openenv import Action, Environment, Observation, State
from openenv.tasks import InlineTasks, Task


class TargetAction(Action):
    n: int = Field(ge=0, le=3, description="Your guess (0..3)")


class TargetObservation(Observation):
    hint: str = ""


class TargetEnv(Environment[TargetAction, TargetObservation, State]):
    SUPPORTS_CONCURRENT_SESSIONS = True
    BLOCKING = False
    tasks = InlineTasks([{"id": f"train-{i}", "split": "train", "seed": i, "target": i % 4} for i in range(8)]
                        + [{"id": f"test-{i}", "split": "test", "seed": 100 + i, "target": i % 4} for i in range(6)])

    def reset(self, seed: int | None = None, episode_id: str | None = None, task: Task | None = None,
              **kwargs: Any) -> TargetObservation:
        self._state = State(episode_id=episode_id or str(uuid.uuid4()))
        self._target = int(task.data["target"]) if task is not None else 0
        return TargetObservation(hint="guess a number from 0 to 3", reward=0.0)

    def step(self, action: TargetAction, timeout_s: float | None = None, **kwargs: Any) -> TargetObservation:
        self._state.step_count += 1
        hit = action.n == self._target
        return TargetObservation(hint="hit" if hit else "miss", reward=1.0 if hit else 0.0, done=True,
                                 metadata={"reward_components": {"hit": float(hit)}})

    @property
    def state(self) -> State:
        return self._state
