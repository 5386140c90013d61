"""2048: slide and merge tiles on a 4x4 board; seeded tile spawns.

Names are imported on first use: loading the plugin hook module (``openenv_env_twenty48.plugin``),
which imports this package, must not import the env.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.lazy import lazy_exports

if TYPE_CHECKING:
    from openenv_env_twenty48.board import slide_row
    from openenv_env_twenty48.env import Twenty48Env
    from openenv_env_twenty48.models import Twenty48Action, Twenty48Observation, Twenty48State
    from openenv_env_twenty48.policy import greedy_move, lookahead_move


__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "Twenty48Action": ".models",
    "Twenty48Env": ".env",
    "Twenty48Observation": ".models",
    "Twenty48State": ".models",
    "greedy_move": ".policy",
    "lookahead_move": ".policy",
    "slide_row": ".board",
})
