"""Wordle: guess the five-letter word in six tries, with green/yellow/grey feedback.

Names are imported on first use: loading the plugin hook module (``openenv_env_wordle.plugin``),
which imports this package, must not import the env.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from openenv_env_wordle.env import WordleEnv
    from openenv_env_wordle.feedback import score_guess
    from openenv_env_wordle.models import WordleAction, WordleObservation, WordleState
    from openenv_env_wordle.oracle import Solver
    from openenv_env_wordle.words import WORDS

__all__ = [
    "Solver",
    "WORDS",
    "WordleAction",
    "WordleEnv",
    "WordleObservation",
    "WordleState",
    "score_guess",
]

_EXPORTS = {
    "Solver": "openenv_env_wordle.oracle",
    "WORDS": "openenv_env_wordle.words",
    "WordleAction": "openenv_env_wordle.models",
    "WordleEnv": "openenv_env_wordle.env",
    "WordleObservation": "openenv_env_wordle.models",
    "WordleState": "openenv_env_wordle.models",
    "score_guess": "openenv_env_wordle.feedback",
}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'openenv_env_wordle' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
