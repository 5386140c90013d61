"""The 2048 env as an ASGI app, for ``uvicorn openenv_env_twenty48.server.app:app``.

Built on import with every installed transport; ``openenv serve 2048`` is the usual way.
"""

from __future__ import annotations

from openenv.server import create_app
from openenv_env_twenty48.env import Twenty48Env

__all__ = ["app"]

app = create_app(Twenty48Env, max_sessions=64, env_name="2048")
