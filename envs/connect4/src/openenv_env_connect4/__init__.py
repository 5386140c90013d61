"""Connect Four: 7x6 board against a built-in opponent (random or heuristic).

Names are imported on first use: loading the plugin hook module (``openenv_env_connect4.plugin``),
which imports this package, must not import the env.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from openenv_env_connect4.board import Board
    from openenv_env_connect4.env import Connect4Env
    from openenv_env_connect4.models import Connect4Action, Connect4Observation, Connect4State
    from openenv_env_connect4.oracle import choose_move

__all__ = [
    "Board",
    "Connect4Action",
    "Connect4Env",
    "Connect4Observation",
    "Connect4State",
    "choose_move",
]

_EXPORTS = {
    "Board": "openenv_env_connect4.board",
    "Connect4Action": "openenv_env_connect4.models",
    "Connect4Env": "openenv_env_connect4.env",
    "Connect4Observation": "openenv_env_connect4.models",
    "Connect4State": "openenv_env_connect4.models",
    "choose_move": "openenv_env_connect4.oracle",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'openenv_env_connect4' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
