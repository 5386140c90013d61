"""The MuJoCo env as an ASGI app, for ``uvicorn openenv_env_mujoco.server.app:app``.

Built on import with every installed transport; ``openenv serve mujoco`` is the usual way.
"""

from __future__ import annotations

from openenv.server import create_app
from openenv_env_mujoco.env import MujocoEnv

__all__ = ["app"]

app = create_app(MujocoEnv, max_sessions=32, env_name="mujoco")
