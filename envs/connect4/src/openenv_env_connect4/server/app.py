"""The connect4 env as an ASGI app, for ``uvicorn openenv_env_connect4.server.app:app``.

Built on import with every installed transport; ``openenv serve connect4`` is the usual way.
"""

from __future__ import annotations

from openenv.server import create_app
from openenv_env_connect4.env import Connect4Env

__all__ = ["app"]

app = create_app(Connect4Env, max_sessions=64, env_name="connect4")
