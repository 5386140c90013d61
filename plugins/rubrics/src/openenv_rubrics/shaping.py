"""Shaping rubrics: rewards computed from an observation's own fields (the echo and grid envs).

* ``length_score`` — ``scale × length`` of a text field (``unit``: chars or words), range
  ``[0, scale × max_length]`` (unbounded without ``max_length``);
* ``fields_equal`` — ``on_equal`` when two field paths hold equal values, else ``on_differ``
  (the grid world: position equals goal → +1.0, else the step penalty).
"""

from __future__ import annotations

import math
from typing import Any

from openenv.errors import ConfigError
from openenv.rubric import Rubric
from openenv_rubrics.fields import FieldPath, as_text

__all__ = ["FieldsEqual", "LengthScore"]


class LengthScore(Rubric):
    """``scale × len(text)`` for the text at ``response`` (a field path, default ``"action"``)."""

    high = math.inf

    def __init__(self, *, response: str = "action", scale: float = 1.0, unit: str = "chars",
                 max_length: int | None = None, **kw: Any) -> None:
        if not (isinstance(scale, int | float) and math.isfinite(scale) and scale > 0):
            raise ConfigError(f"rubric 'length_score': scale must be a positive number, got {scale!r}.")
        if max_length is not None and max_length < 1:
            raise ConfigError(f"rubric 'length_score': max_length must be >= 1, got {max_length!r}.")
        kw.setdefault("high", math.inf if max_length is None else scale * max_length)
        super().__init__(**kw)
        if unit not in ("chars", "words"):
            raise ConfigError(f"rubric '{self.name}': unit must be 'chars' or 'words', got {unit!r}.")
        self.response = FieldPath(response, owner=self.name)
        self.scale, self.unit = float(scale), unit

    def evaluate(self, action: Any, observation: Any) -> float:
        text = as_text(self.name, self.response, self.response.get(self.name, action, observation))
        return self.scale * (len(text) if self.unit == "chars" else len(text.split()))


class FieldsEqual(Rubric):
    """``on_equal`` when the values at field paths ``left`` and ``right`` are equal, else ``on_differ``."""

    def __init__(self, *, left: str, right: str, on_equal: float = 1.0, on_differ: float = 0.0,
                 **kw: Any) -> None:
        lo, hi = min(on_equal, on_differ), max(on_equal, on_differ)
        if lo == hi:
            raise ConfigError(f"rubric 'fields_equal': on_equal and on_differ are both {lo}; give two "
                              "different scores.")
        kw.setdefault("low", lo)
        kw.setdefault("high", hi)
        super().__init__(**kw)
        self.left = FieldPath(left, owner=self.name)
        self.right = FieldPath(right, owner=self.name)
        self.on_equal, self.on_differ = float(on_equal), float(on_differ)

    def evaluate(self, action: Any, observation: Any) -> float:
        same = self.left.get(self.name, action, observation) == self.right.get(self.name, action, observation)
        return self.on_equal if same else self.on_differ
