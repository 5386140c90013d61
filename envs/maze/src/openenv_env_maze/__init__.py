"""Maze: a perfect maze generated from the seed; reach the exit.

Names are imported on first use: loading the plugin hook module (``openenv_env_maze.plugin``),
which imports this package, must not import the env.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from openenv_env_maze.env import MazeEnv
    from openenv_env_maze.generate import generate_maze
    from openenv_env_maze.models import MazeAction, MazeObservation, MazeState
    from openenv_env_maze.oracle import shortest_path, solve

__all__ = [
    "MazeAction",
    "MazeEnv",
    "MazeObservation",
    "MazeState",
    "generate_maze",
    "shortest_path",
    "solve",
]

_EXPORTS = {
    "MazeAction": "openenv_env_maze.models",
    "MazeEnv": "openenv_env_maze.env",
    "MazeObservation": "openenv_env_maze.models",
    "MazeState": "openenv_env_maze.models",
    "generate_maze": "openenv_env_maze.generate",
    "shortest_path": "openenv_env_maze.oracle",
    "solve": "openenv_env_maze.oracle",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'openenv_env_maze' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
