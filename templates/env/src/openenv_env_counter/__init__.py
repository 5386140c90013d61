"""The counter env: add 1-3 per step, reach the target exactly."""

from __future__ import annotations

from openenv_env_counter.env import CounterEnv
from openenv_env_counter.models import CountAction, CountObservation, CountState

__all__ = ["CountAction", "CountObservation", "CountState", "CounterEnv"]
