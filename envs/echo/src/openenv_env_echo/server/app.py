"""The echo env as an ASGI app, for ``uvicorn openenv_env_echo.server.app:app``.

Built on import with every installed transport; ``openenv serve echo`` is the usual way to run it.
"""

from __future__ import annotations

from openenv.server import create_app
from openenv_env_echo.env import EchoEnv

__all__ = ["app"]

app = create_app(EchoEnv, max_sessions=64, env_name="echo")
