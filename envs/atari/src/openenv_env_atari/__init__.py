"""Atari 2600 games through ale-py: games and seeds as tasks, RAM or a small grayscale frame.

Names are imported on first use: loading the plugin hook module (``openenv_env_atari.plugin``),
which imports this package, must not import the env (nor ale-py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.lazy import lazy_exports

if TYPE_CHECKING:
    from openenv_env_atari.env import AtariEnv, available_games
    from openenv_env_atari.models import AtariAction, AtariObservation, AtariState
    from openenv_env_atari.policy import pong_tracker, random_policy


__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "AtariAction": ".models",
    "AtariEnv": ".env",
    "AtariObservation": ".models",
    "AtariState": ".models",
    "available_games": ".env",
    "pong_tracker": ".policy",
    "random_policy": ".policy",
})
