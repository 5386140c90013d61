"""2048: slide and merge tiles on a 4x4 board; seeded tile spawns.

Names are imported on first use: loading the plugin hook module (``openenv_env_twenty48.plugin``),
which imports this package, must not import the env.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from openenv_env_twenty48.board import slide_row
    from openenv_env_twenty48.env import Twenty48Env
    from openenv_env_twenty48.models import Twenty48Action, Twenty48Observation, Twenty48State
    from openenv_env_twenty48.policy import greedy_move, lookahead_move

__all__ = [
    "Twenty48Action",
    "Twenty48Env",
    "Twenty48Observation",
    "Twenty48State",
    "greedy_move",
    "lookahead_move",
    "slide_row",
]

_EXPORTS = {
    "Twenty48Action": "openenv_env_twenty48.models",
    "Twenty48Env": "openenv_env_twenty48.env",
    "Twenty48Observation": "openenv_env_twenty48.models",
    "Twenty48State": "openenv_env_twenty48.models",
    "greedy_move": "openenv_env_twenty48.policy",
    "lookahead_move": "openenv_env_twenty48.policy",
    "slide_row": "openenv_env_twenty48.board",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'openenv_env_twenty48' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
