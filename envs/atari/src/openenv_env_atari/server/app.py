"""The Atari env as an ASGI app, for ``uvicorn openenv_env_atari.server.app:app``.

Built on import with every installed transport; ``openenv serve atari`` is the usual way.
"""

from __future__ import annotations

from openenv.server import create_app
from openenv_env_atari.env import AtariEnv

__all__ = ["app"]

app = create_app(AtariEnv, max_sessions=32, env_name="atari")
