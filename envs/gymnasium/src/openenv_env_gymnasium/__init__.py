"""Any Gymnasium env id (see ``env.py``). Names are imported on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.lazy import lazy_exports

if TYPE_CHECKING:
    from openenv_env_gymnasium.env import GymnasiumEnv
    from openenv_env_gymnasium.models import GymAction, GymObservation, GymState


__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "GymAction": ".models",
    "GymObservation": ".models",
    "GymState": ".models",
    "GymnasiumEnv": ".env",
})
