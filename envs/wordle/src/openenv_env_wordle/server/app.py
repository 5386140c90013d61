"""The wordle env as an ASGI app, for ``uvicorn openenv_env_wordle.server.app:app``.

Built on import with every installed transport; ``openenv serve wordle`` is the usual way.
"""

from __future__ import annotations

from openenv.server import create_app
from openenv_env_wordle.env import WordleEnv

__all__ = ["app"]

app = create_app(WordleEnv, max_sessions=64, env_name="wordle")
