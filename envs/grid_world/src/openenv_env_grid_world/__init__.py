"""Grid world: a small deterministic grid with walls, a goal and a step limit.

Names are imported on first use: loading the plugin hook module (``openenv_env_grid_world.plugin``),
which imports this package, must not import the env.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from openenv_env_grid_world.env import DEFAULT_LAYOUT, GridWorldEnv
    from openenv_env_grid_world.models import MOVES, GridAction, GridObservation, GridState

__all__ = ["DEFAULT_LAYOUT", "MOVES", "GridAction", "GridObservation", "GridState", "GridWorldEnv"]

_EXPORTS = {
    "DEFAULT_LAYOUT": "openenv_env_grid_world.env",
    "GridWorldEnv": "openenv_env_grid_world.env",
    "MOVES": "openenv_env_grid_world.models",
    "GridAction": "openenv_env_grid_world.models",
    "GridObservation": "openenv_env_grid_world.models",
    "GridState": "openenv_env_grid_world.models",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'openenv_env_grid_world' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
