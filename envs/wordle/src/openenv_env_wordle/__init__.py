"""Wordle: guess the five-letter word in six tries, with green/yellow/grey feedback.

Names are imported on first use: loading the plugin hook module (``openenv_env_wordle.plugin``),
which imports this package, must not import the env.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.lazy import lazy_exports

if TYPE_CHECKING:
    from openenv_env_wordle.env import WordleEnv
    from openenv_env_wordle.feedback import score_guess
    from openenv_env_wordle.models import WordleAction, WordleObservation, WordleState
    from openenv_env_wordle.oracle import Solver
    from openenv_env_wordle.words import WORDS


__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "Solver": ".oracle",
    "WORDS": ".words",
    "WordleAction": ".models",
    "WordleEnv": ".env",
    "WordleObservation": ".models",
    "WordleState": ".models",
    "score_guess": ".feedback",
})
