"""The Jupyter env as an ASGI app, for ``uvicorn openenv_env_jupyter.server.app:app``.

Built on import with every installed transport; ``openenv serve jupyter`` is the usual way.
"""

from __future__ import annotations

from openenv.server import create_app
from openenv_env_jupyter.env import JupyterEnv

__all__ = ["app"]

# A session holds a kernel process (~60 MB): keep the default number of sessions modest.
app = create_app(JupyterEnv, max_sessions=16, env_name="jupyter")
