"""Any OpenSpiel game by name (see ``env.py``). Names are imported on first use."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from openenv_env_openspiel.env import OpenSpielEnv
    from openenv_env_openspiel.models import OpenSpielAction, OpenSpielObservation, OpenSpielState

__all__ = ["OpenSpielAction", "OpenSpielEnv", "OpenSpielObservation", "OpenSpielState"]

_EXPORTS = {"OpenSpielEnv": "openenv_env_openspiel.env", "OpenSpielAction": "openenv_env_openspiel.models",
            "OpenSpielObservation": "openenv_env_openspiel.models", "OpenSpielState": "openenv_env_openspiel.models"}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'openenv_env_openspiel' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
