"""Any OpenSpiel game by name (see ``env.py``). Names are imported on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.lazy import lazy_exports

if TYPE_CHECKING:
    from openenv_env_openspiel.env import OpenSpielEnv
    from openenv_env_openspiel.models import OpenSpielAction, OpenSpielObservation, OpenSpielState


__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "OpenSpielAction": ".models",
    "OpenSpielEnv": ".env",
    "OpenSpielObservation": ".models",
    "OpenSpielState": ".models",
})
