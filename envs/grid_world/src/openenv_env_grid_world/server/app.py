"""The grid world as an ASGI app, for ``uvicorn openenv_env_grid_world.server.app:app``.

Built on import with every installed transport; ``openenv serve grid_world`` is the usual way.
"""

from __future__ import annotations

from openenv.server import create_app
from openenv_env_grid_world.env import GridWorldEnv

__all__ = ["app"]

app = create_app(GridWorldEnv, max_sessions=64, env_name="grid_world")
