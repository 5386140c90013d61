"""Grid world: a small deterministic grid with walls, a goal and a step limit.

Names are imported on first use: loading the plugin hook module (``openenv_env_grid_world.plugin``),
which imports this package, must not import the env.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.lazy import lazy_exports

if TYPE_CHECKING:
    from openenv_env_grid_world.env import DEFAULT_LAYOUT, GridWorldEnv
    from openenv_env_grid_world.models import MOVES, GridAction, GridObservation, GridState


__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "DEFAULT_LAYOUT": ".env",
    "GridAction": ".models",
    "GridObservation": ".models",
    "GridState": ".models",
    "GridWorldEnv": ".env",
    "MOVES": ".models",
})
