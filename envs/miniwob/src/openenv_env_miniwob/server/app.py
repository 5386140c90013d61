"""The MiniWoB env as an ASGI app, for ``uvicorn openenv_env_miniwob.server.app:app``.

Built on import with every installed transport; ``openenv serve miniwob`` is the usual way.
"""

from __future__ import annotations

from openenv.server import create_app
from openenv_env_miniwob.env import MiniWoBEnv

__all__ = ["app"]

app = create_app(MiniWoBEnv, max_sessions=32, env_name="miniwob")
