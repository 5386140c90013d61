"""The maze env as an ASGI app, for ``uvicorn openenv_env_maze.server.app:app``.

Built on import with every installed transport; ``openenv serve maze`` is the usual way.
"""

from __future__ import annotations

from openenv.server import create_app
from openenv_env_maze.env import MazeEnv

__all__ = ["app"]

app = create_app(MazeEnv, max_sessions=64, env_name="maze")
