"""Chess against a built-in opponent or stockfish (see ``env.py``).

Names are imported on first use, so loading the plugin hook module does not import ``chess``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.lazy import lazy_exports

if TYPE_CHECKING:
    from openenv_env_chess.env import ChessEnv
    from openenv_env_chess.models import ChessAction, ChessObservation, ChessState


__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "ChessAction": ".models",
    "ChessEnv": ".env",
    "ChessObservation": ".models",
    "ChessState": ".models",
})
