"""Chess against a built-in opponent or stockfish (see ``env.py``).

Names are imported on first use, so loading the plugin hook module does not import ``chess``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from openenv_env_chess.env import ChessEnv
    from openenv_env_chess.models import ChessAction, ChessObservation, ChessState

__all__ = ["ChessAction", "ChessEnv", "ChessObservation", "ChessState"]

_EXPORTS = {"ChessEnv": "openenv_env_chess.env", "ChessAction": "openenv_env_chess.models",
            "ChessObservation": "openenv_env_chess.models", "ChessState": "openenv_env_chess.models"}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'openenv_env_chess' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
