"""The Wordle oracle: keep the words that agree with every feedback so far, and guess the word
that splits the remaining candidates into the most feedback groups.

``Solver`` keeps its candidates between guesses; ``solve(obs)`` rebuilds them from an
observation's history, so it needs nothing but what the agent sees.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from openenv_env_wordle.feedback import feedback_pattern
from openenv_env_wordle.models import WordleObservation
from openenv_env_wordle.words import WORDS

__all__ = ["Solver", "best_guess", "solve"]


def best_guess(candidates: Iterable[str], pool: Iterable[str] = WORDS) -> str:
    """The word of ``pool`` that splits ``candidates`` into the most feedback groups (a candidate
    wins ties, then the earlier word). With one or two candidates, the first candidate."""
    cands = list(candidates)
    if not cands:
        raise ValueError("no word agrees with the feedback so far")
    if len(cands) <= 2:
        return cands[0]
    return _best(tuple(cands), tuple(pool))


@lru_cache(maxsize=8)
def _best(cands: tuple[str, ...], pool: tuple[str, ...]) -> str:
    inside = set(cands)
    best, best_key = cands[0], (-1, False)
    for word in pool:
        key = (len({feedback_pattern(word, c) for c in cands}), word in inside)
        if key > best_key:
            best, best_key = word, key
    return best


class Solver:
    """The candidates that agree with the feedback seen so far."""

    def __init__(self, words: Iterable[str] = WORDS) -> None:
        self.words = tuple(words)
        self.candidates = list(self.words)

    def update(self, guess: str, pattern: str) -> None:
        """Keep the candidates that would have given ``pattern`` (``G``/``Y``/``-``) for ``guess``."""
        self.candidates = [w for w in self.candidates if feedback_pattern(guess, w) == pattern]

    def guess(self) -> str:
        return best_guess(self.candidates, self.words)


def solve(obs: WordleObservation | Mapping[str, Any]) -> dict[str, str]:
    """The oracle's next guess for an observation (or its dict): ``{"guess": word}``."""
    data = obs.model_dump() if isinstance(obs, WordleObservation) else obs
    solver = Solver()
    for entry in data["history"]:
        solver.update(entry["word"], entry["pattern"])
    return {"guess": solver.guess()}
