"""Gymnasium spaces <-> JSON: actions checked against the space, observations as plain JSON.

* ``to_json(value)``: numpy arrays become (nested) lists, numpy scalars Python numbers, tuples
  lists, dicts keep their keys; non-finite floats become ``None`` (JSON has no infinity).
* ``from_json(space, value)``: the JSON action for a ``Discrete``, ``Box``, ``MultiDiscrete``,
  ``MultiBinary``, ``Dict`` or ``Tuple`` space, as the value the env takes; anything outside the
  space raises ``SpaceError`` saying what the space accepts.
* ``describe(space)``: a JSON description of a space (type, sizes, bounds).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from gymnasium import spaces

__all__ = ["SpaceError", "describe", "from_json", "to_json"]


class SpaceError(ValueError):
    """An action does not belong to the action space."""


def to_json(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return to_json(value.tolist())
    if isinstance(value, np.generic):
        return to_json(value.item())
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    if value is None or isinstance(value, bool | int | str):
        return value
    return str(value)


def describe(space: spaces.Space[Any]) -> dict[str, Any]:
    if isinstance(space, spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, spaces.Box):
        return {"type": "Box", "shape": list(space.shape), "dtype": str(space.dtype),
                "low": to_json(space.low), "high": to_json(space.high)}
    if isinstance(space, spaces.MultiDiscrete):
        return {"type": "MultiDiscrete", "nvec": to_json(space.nvec), "start": to_json(space.start)}
    if isinstance(space, spaces.MultiBinary):
        return {"type": "MultiBinary", "n": to_json(space.n)}
    if isinstance(space, spaces.Dict):
        return {"type": "Dict", "spaces": {k: describe(s) for k, s in space.spaces.items()}}
    if isinstance(space, spaces.Tuple):
        return {"type": "Tuple", "spaces": [describe(s) for s in space.spaces]}
    return {"type": type(space).__name__, "repr": str(space)}


def _array(space: spaces.Space[Any], value: Any, dtype: Any, what: str) -> np.ndarray:
    shape = space.shape or ()
    if isinstance(value, bool) or (isinstance(value, list) and _has_bool(value)):
        raise SpaceError(f"{what}: booleans are not numbers here; send numbers")
    try:
        array = np.asarray(value, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise SpaceError(f"{what}: {value!r} is not a numeric array of shape {list(shape)} ({exc})") from None
    if array.shape != shape and array.size == int(np.prod(shape)) and array.ndim <= 1:
        array = array.reshape(shape)  # a scalar for shape (1,), or a flat list
    if array.shape != shape:
        raise SpaceError(f"{what}: expected shape {list(shape)}, got {list(array.shape)}")
    return array


def _has_bool(value: Any) -> bool:
    if isinstance(value, list):
        return any(_has_bool(v) for v in value)
    return isinstance(value, bool)


def from_json(space: spaces.Space[Any], value: Any, what: str = "action") -> Any:
    if isinstance(space, spaces.Discrete):
        low, high = int(space.start), int(space.start + space.n - 1)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise SpaceError(f"{what} {value!r} is not in Discrete({space.n}): send an int in {low}..{high}")
        return np.int64(value)
    if isinstance(space, spaces.Box):
        array = _array(space, value, space.dtype, what)
        if not np.all(np.isfinite(array)) or not space.contains(array):
            raise SpaceError(f"{what} {to_json(array)} is outside the Box: low {to_json(space.low)}, "
                             f"high {to_json(space.high)}")
        return array
    if isinstance(space, spaces.MultiDiscrete | spaces.MultiBinary):
        if _has_bool(value) if isinstance(value, list) else isinstance(value, bool):
            raise SpaceError(f"{what}: booleans are not numbers here; send ints")
        if isinstance(value, list) and any(isinstance(v, float) and not v.is_integer() for v in np.ravel(value)):
            raise SpaceError(f"{what}: {value!r} must hold ints")
        array = _array(space, value, space.dtype, what)
        if not space.contains(array):
            raise SpaceError(f"{what} {to_json(array)} is outside {space}")
        return array
    if isinstance(space, spaces.Dict):
        if not isinstance(value, dict) or set(value) != set(space.spaces):
            raise SpaceError(f"{what} must be an object with exactly the keys {sorted(space.spaces)}, got "
                             f"{sorted(value) if isinstance(value, dict) else type(value).__name__}")
        return {k: from_json(s, value[k], f"{what}.{k}") for k, s in space.spaces.items()}
    if isinstance(space, spaces.Tuple):
        if not isinstance(value, list) or len(value) != len(space.spaces):
            raise SpaceError(f"{what} must be a list of {len(space.spaces)} items")
        return tuple(from_json(s, v, f"{what}[{i}]") for i, (s, v) in enumerate(zip(space.spaces, value, strict=True)))
    raise SpaceError(f"{what}: the action space {space} ({type(space).__name__}) is not supported; supported are "
                     "Discrete, Box, MultiDiscrete, MultiBinary, Dict and Tuple")
