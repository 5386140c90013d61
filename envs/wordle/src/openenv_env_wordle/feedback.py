"""Wordle feedback: green (right letter, right place), yellow (in the word, elsewhere), grey.

Repeated letters follow the game's rule: greens are matched first; then, left to right, a letter
is yellow only while the secret still has an unmatched copy of it. So guessing ``geese`` for
``those`` gives ``---GG``: the last ``e`` is green and the secret has no other ``e``, so the first
two are grey, not yellow.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["COLOURS", "Colour", "feedback_pattern", "pattern_of", "score_guess"]

Colour = Literal["green", "yellow", "grey"]
COLOURS: tuple[Colour, ...] = ("green", "yellow", "grey")
_SYMBOL: dict[str, str] = {"green": "G", "yellow": "Y", "grey": "-"}
_COLOUR: dict[str, Colour] = {"G": "green", "Y": "yellow", "-": "grey"}


def feedback_pattern(guess: str, secret: str) -> str:
    """The feedback as five symbols, ``G`` green, ``Y`` yellow, ``-`` grey (``"GY--G"``)."""
    if len(guess) != len(secret):
        raise ValueError("guess and secret must have the same length")
    out = ["-"] * len(guess)
    spare: dict[str, int] = {}  # the secret's letters not matched by a green
    for i, (g, s) in enumerate(zip(guess, secret, strict=True)):
        if g == s:
            out[i] = "G"
        else:
            spare[s] = spare.get(s, 0) + 1
    for i, g in enumerate(guess):
        if out[i] != "G" and spare.get(g, 0) > 0:
            out[i] = "Y"
            spare[g] -= 1
    return "".join(out)


def score_guess(guess: str, secret: str) -> list[Colour]:
    """The colour of each letter of ``guess`` against ``secret`` (both five lowercase letters)."""
    return [_COLOUR[ch] for ch in feedback_pattern(guess, secret)]


def pattern_of(colours: list[Colour]) -> str:
    """The symbols of a list of colours: ``G`` green, ``Y`` yellow, ``-`` grey."""
    return "".join(_SYMBOL[c] for c in colours)
