"""reasoning-gym tasks by name (see ``env.py``). Names are imported on first use."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from openenv_env_reasoning_gym.env import ReasoningGymEnv
    from openenv_env_reasoning_gym.models import ReasoningAction, ReasoningObservation, ReasoningState

__all__ = ["ReasoningAction", "ReasoningGymEnv", "ReasoningObservation", "ReasoningState"]

_EXPORTS = {
    "ReasoningGymEnv": "openenv_env_reasoning_gym.env",
    "ReasoningAction": "openenv_env_reasoning_gym.models",
    "ReasoningObservation": "openenv_env_reasoning_gym.models",
    "ReasoningState": "openenv_env_reasoning_gym.models",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'openenv_env_reasoning_gym' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
