"""Where a rubric finds its inputs: dotted paths into the step (``"action.message"``).

A path starts at ``action`` or ``observation`` and walks attributes (pydantic models, dataclasses)
or mapping keys (JSON from a rollout file), so the same rubric config works on live objects and on
stored rollouts. A missing field is a ``RubricError`` naming the path and what was there instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from openenv.errors import ConfigError
from openenv.rubric import RubricError

__all__ = ["FieldPath", "as_text"]

_ROOTS = ("action", "observation")


class FieldPath:
    """A compiled ``root.part.part`` path; ``get(rubric_name, action, observation)`` resolves it."""

    __slots__ = ("parts", "root_is_action", "text")
    #: Marks a field path for ``Rubric.input_fields`` (a server checks them against the env's models).
    is_field_path = True

    def __init__(self, text: str, *, owner: str = "rubric") -> None:
        parts = text.split(".") if isinstance(text, str) else []
        if not parts or parts[0] not in _ROOTS or any(not p for p in parts):
            raise ConfigError(
                f"rubric '{owner}': field path {text!r} must start with 'action' or 'observation', "
                "e.g. 'action.message' or 'observation.metadata.answer'."
            )
        self.text = text
        self.root_is_action = parts[0] == "action"
        self.parts = tuple(parts[1:])

    def get(self, owner: str, action: Any, observation: Any) -> Any:
        value = action if self.root_is_action else observation
        for part in self.parts:
            if isinstance(value, Mapping):
                if part not in value:
                    raise RubricError(owner, f"field '{self.text}' not found: no key '{part}' "
                                             f"(keys: {', '.join(map(str, value)) or 'none'}).")
                value = value[part]
            else:
                try:
                    value = getattr(value, part)
                except AttributeError:
                    raise RubricError(owner, f"field '{self.text}' not found: "
                                             f"{type(value).__name__} has no attribute '{part}'.") from None
        return value

    def get_or(self, default: Any, action: Any, observation: Any) -> Any:
        """The value at the path, or ``default`` when a part of it is missing."""
        value = action if self.root_is_action else observation
        for part in self.parts:
            if isinstance(value, Mapping):
                if part not in value:
                    return default
                value = value[part]
            else:
                value = getattr(value, part, _NOTHING)
                if value is _NOTHING:
                    return default
        return value

    def __repr__(self) -> str:
        return f"FieldPath({self.text!r})"


_NOTHING = object()


def as_text(owner: str, path: FieldPath, value: Any) -> str:
    """``value`` as a string; anything else (a dict, None) is a fault, never ``str()``-ed silently."""
    if isinstance(value, str):
        return value
    raise RubricError(owner, f"field '{path.text}' is {type(value).__name__} {value!r}, expected a string. "
                             "Point the rubric at a text field (e.g. response='action.message').")
