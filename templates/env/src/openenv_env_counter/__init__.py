"""The counter env: add 1-3 per step, reach the target exactly.

Names are imported on first use (``openenv.lazy``): loading the plugin hook module, which imports
this package, must not import the env.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.lazy import lazy_exports

if TYPE_CHECKING:
    from openenv_env_counter.env import CounterEnv
    from openenv_env_counter.models import CountAction, CountObservation, CountState

__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "CountAction": ".models",
    "CountObservation": ".models",
    "CountState": ".models",
    "CounterEnv": ".env",
})
