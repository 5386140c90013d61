"""Any Gymnasium env id (see ``env.py``). Names are imported on first use."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from openenv_env_gymnasium.env import GymnasiumEnv
    from openenv_env_gymnasium.models import GymAction, GymObservation, GymState

__all__ = ["GymAction", "GymnasiumEnv", "GymObservation", "GymState"]

_EXPORTS = {"GymnasiumEnv": "openenv_env_gymnasium.env", "GymAction": "openenv_env_gymnasium.models",
            "GymObservation": "openenv_env_gymnasium.models", "GymState": "openenv_env_gymnasium.models"}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'openenv_env_gymnasium' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
