"""MuJoCo continuous control: Gymnasium's v5 MuJoCo tasks, the state vector and an offscreen image.

Names are imported on first use: loading the plugin hook module (``openenv_env_mujoco.plugin``),
which imports this package, must not import the env (nor MuJoCo).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.lazy import lazy_exports

if TYPE_CHECKING:
    from openenv_env_mujoco.env import CONTROL_TASKS, MujocoEnv
    from openenv_env_mujoco.models import MujocoAction, MujocoObservation, MujocoState
    from openenv_env_mujoco.policy import pendulum_balancer, random_policy


__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "CONTROL_TASKS": ".env",
    "MujocoAction": ".models",
    "MujocoEnv": ".env",
    "MujocoObservation": ".models",
    "MujocoState": ".models",
    "pendulum_balancer": ".policy",
    "random_policy": ".policy",
})
