"""Maze: a perfect maze generated from the seed; reach the exit.

Names are imported on first use: loading the plugin hook module (``openenv_env_maze.plugin``),
which imports this package, must not import the env.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.lazy import lazy_exports

if TYPE_CHECKING:
    from openenv_env_maze.env import MazeEnv
    from openenv_env_maze.generate import generate_maze
    from openenv_env_maze.models import MazeAction, MazeObservation, MazeState
    from openenv_env_maze.oracle import shortest_path, solve


__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "MazeAction": ".models",
    "MazeEnv": ".env",
    "MazeObservation": ".models",
    "MazeState": ".models",
    "generate_maze": ".generate",
    "shortest_path": ".oracle",
    "solve": ".oracle",
})
