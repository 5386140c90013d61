"""reasoning-gym tasks by name (see ``env.py``). Names are imported on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.lazy import lazy_exports

if TYPE_CHECKING:
    from openenv_env_reasoning_gym.env import ReasoningGymEnv
    from openenv_env_reasoning_gym.models import ReasoningAction, ReasoningObservation, ReasoningState


__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "ReasoningAction": ".models",
    "ReasoningGymEnv": ".env",
    "ReasoningObservation": ".models",
    "ReasoningState": ".models",
})
