"""Connect Four: 7x6 board against a built-in opponent (random or heuristic).

Names are imported on first use: loading the plugin hook module (``openenv_env_connect4.plugin``),
which imports this package, must not import the env.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.lazy import lazy_exports

if TYPE_CHECKING:
    from openenv_env_connect4.board import Board
    from openenv_env_connect4.env import Connect4Env
    from openenv_env_connect4.models import Connect4Action, Connect4Observation, Connect4State
    from openenv_env_connect4.oracle import choose_move


__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "Board": ".board",
    "Connect4Action": ".models",
    "Connect4Env": ".env",
    "Connect4Observation": ".models",
    "Connect4State": ".models",
    "choose_move": ".oracle",
})
