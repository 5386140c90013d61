"""A dependency-free env for provider tests (importable through PYTHONPATH)."""

from __future__ import annotations

from typing import Any

from openenv.env import Environment
from openenv.types import Action, Observation, State


class TinyAction(Action):
    value: int = 0


class TinyObservation(Observation):
    total: int = 0


class TinyEnv(Environment[TinyAction, TinyObservation, State]):
    SUPPORTS_CONCURRENT_SESSIONS = True
    BLOCKING = False

    def __init__(self) -> None:
        super().__init__()
        self._state = State()
        self._total = 0

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kw: Any) -> TinyObservation:
        self._state = State(episode_id=episode_id or "tiny", step_count=0)
        self._total = 0
        return TinyObservation(total=0, reward=0.0)

    def step(self, action: TinyAction, timeout_s: float | None = None, **kw: Any) -> TinyObservation:
        self._state.step_count += 1
        self._total += action.value
        return TinyObservation(total=self._total, reward=float(action.value))

    @property
    def state(self) -> State:
        return self._state
