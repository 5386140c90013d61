"""Gymnasium spaces from JSON schemas (``GET /schema``), and conversion of values both ways.

Mapping (per field of the action / observation model):

==========================================  ===========================================
JSON schema                                  space (value given to / taken from the agent)
==========================================  ===========================================
``enum`` / ``Literal`` / ``const``           ``Discrete(n)`` (index into the choices)
``boolean``                                  ``Discrete(2)`` (0 / 1)
``integer`` with both bounds (≤ 1024 values) ``Discrete(n, start=minimum)``
``integer`` otherwise                        ``Box((), int64)`` within its bounds
``number``                                   ``Box((), float64)`` within its bounds
``array`` of numbers, fixed length           ``Box((n,))``
image (``x-openenv-image``) with a size       ``Box(0, 255, (height, width, 3), uint8)`` (decoded RGB pixels)
image without a declared size                ``ImageSpace`` (any height x width x 3 uint8 array)
``string``                                   ``AnyText`` (a ``Text`` space holding any str ≤ maxLength)
``object`` with properties                   ``Dict`` of its fields
anything else (free arrays, unions, dicts)   ``JSONSpace`` (the JSON value itself)
==========================================  ===========================================

``reward``, ``done`` and ``metadata`` are never part of the observation space (they are the
step's reward, ``terminated`` and ``info``).

An image field (``openenv.types.Image``) arrives as a data URL and is given to the agent decoded
(Pillow); a missing frame (``None``) is an all-black one, so every observation fits the space.
"""

from __future__ import annotations

import json
import string
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from openenv.images import IMAGE_SCHEMA_KEY, Image

__all__ = ["AnyText", "ImageSpace", "JSONSpace", "SpaceMap", "space_for"]

_SKIP_OBS = {"reward", "done", "metadata"}
_MAX_DISCRETE = 1024


class JSONSpace(gym.Space[Any]):
    """Any JSON value (what the schema allows is checked by the env, not here). ``sample`` draws
    from the JSON schema with this space's seeded RNG."""

    def __init__(self, schema: dict[str, Any] | None = None, defs: dict[str, Any] | None = None,
                 seed: int | None = None) -> None:
        self.schema, self.defs = dict(schema or {}), dict(defs or {})
        super().__init__(None, None, seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> Any:
        from openenv.cli.run_cmd import ActionSampler

        def choose(options: list[Any]) -> Any:
            return options[int(self.np_random.integers(len(options)))]

        sampler = ActionSampler({**self.schema, "$defs": self.defs}, choose)
        return sampler._value({**self.schema}, top=False)

    def contains(self, x: Any) -> bool:
        try:
            json.dumps(x)
        except (TypeError, ValueError):
            return False
        return True

    def __repr__(self) -> str:
        return f"JSONSpace({json.dumps(self.schema)[:60]})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, JSONSpace) and other.schema == self.schema


class AnyText(spaces.Text):
    """A ``Text`` space that holds any string up to ``max_length`` (``sample`` uses printable ASCII)."""

    def __init__(self, max_length: int, min_length: int = 0, seed: int | None = None) -> None:
        super().__init__(max_length, min_length=min_length, charset=string.ascii_letters + string.digits + " ",
                         seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length


class ImageSpace(gym.Space[np.ndarray]):
    """RGB frames of a size the env does not declare: any ``uint8`` array of shape (height, width, 3).

    A ``Box`` needs its shape up front; an env that declares ``ImageSpec(width=..., height=...)``
    gets one. There is nothing honest to ``sample`` without a size, so sampling raises.
    """

    def __init__(self, seed: int | None = None) -> None:
        super().__init__(None, np.uint8, seed)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def sample(self, mask: Any = None, probability: Any = None) -> np.ndarray:
        raise NotImplementedError("ImageSpace has no size to sample: the env's Image field declares none "
                                  "(declare one with ImageSpec(width=..., height=...) to get a Box)")

    def contains(self, x: Any) -> bool:
        return isinstance(x, np.ndarray) and x.dtype == np.uint8 and x.ndim == 3 and x.shape[2] == 3

    def __repr__(self) -> str:
        return "ImageSpace(H, W, 3, uint8)"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ImageSpace)


def _image(declared: dict[str, Any]) -> SpaceMap:
    width, height = declared.get("width"), declared.get("height")
    space: gym.Space[Any]
    if isinstance(width, int) and isinstance(height, int):
        space = spaces.Box(low=0, high=255, shape=(height, width, 3), dtype=np.uint8)
    else:
        space = ImageSpace()

    def to_agent(value: Any) -> np.ndarray:
        if value is None:
            return _empty(space)  # type: ignore[no-any-return]
        return Image(value).to_array()

    return SpaceMap(space, lambda v: str(Image(v)), to_agent)


class SpaceMap:
    """A space for one schema node, with ``to_env`` (agent value -> JSON) and ``to_agent`` (JSON -> agent)."""

    def __init__(self, space: gym.Space[Any], to_env: Any, to_agent: Any) -> None:
        self.space, self.to_env, self.to_agent = space, to_env, to_agent


def _resolve(s: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    for _ in range(16):
        ref = s.get("$ref")
        if not isinstance(ref, str):
            return s
        s = {**defs.get(ref.rsplit("/", 1)[-1], {}), **{k: v for k, v in s.items() if k != "$ref"}}
    return s


def _choices(s: dict[str, Any]) -> list[Any] | None:
    if "const" in s:
        return [s["const"]]
    if isinstance(s.get("enum"), list) and s["enum"]:
        return list(s["enum"])
    return None


def _empty(space: gym.Space[Any]) -> Any:
    """The value of a field the env left out (and has no default): fixed, so episodes stay seeded."""
    if isinstance(space, spaces.Discrete):
        return int(space.start)
    if isinstance(space, spaces.Box):
        return np.clip(np.zeros(space.shape, dtype=space.dtype), space.low, space.high)
    if isinstance(space, spaces.Text):
        return "a" * space.min_length
    if isinstance(space, ImageSpace):
        return np.zeros((1, 1, 3), dtype=np.uint8)
    return None


def _json(s: dict[str, Any], defs: dict[str, Any]) -> SpaceMap:
    return SpaceMap(JSONSpace(s, defs), lambda v: v, lambda v: v)


def space_for(schema: dict[str, Any], *, observation: bool = False, defs: dict[str, Any] | None = None) -> SpaceMap:
    """The ``SpaceMap`` of a model schema (top level: an object; see the module's table)."""
    defs = dict(defs if defs is not None else (schema.get("$defs") or {}))
    s = _resolve(schema, defs)
    if "allOf" in s and len(s["allOf"]) == 1:
        s = _resolve({**s["allOf"][0], **{k: v for k, v in s.items() if k != "allOf"}}, defs)
    if isinstance(s.get(IMAGE_SCHEMA_KEY), dict):  # Annotated[Image | None, ImageSpec(...)]: declared outside
        return _image(s[IMAGE_SCHEMA_KEY])
    options = s.get("anyOf") or s.get("oneOf")
    if isinstance(options, list):
        real = [o for o in options if _resolve(o, defs).get("type") != "null"]
        declared = _resolve(real[0], defs).get(IMAGE_SCHEMA_KEY) if len(real) == 1 else None
        if isinstance(declared, dict):  # Image | None: a missing frame is a black one (see above)
            return _image(declared)
        if len(real) != 1 or len(real) != len(options):
            return _json(s, defs)
        s = _resolve(real[0], defs)
    choices = _choices(s)
    if choices is not None:
        index = {json.dumps(c, sort_keys=True): i for i, c in enumerate(choices)}
        return SpaceMap(spaces.Discrete(len(choices)), lambda v: choices[int(v)],
                        lambda v: int(index.get(json.dumps(v, sort_keys=True), 0)))
    kind = s.get("type")
    declared = s.get(IMAGE_SCHEMA_KEY)
    if kind == "string" and isinstance(declared, dict):
        return _image(declared)
    if kind == "boolean":
        return SpaceMap(spaces.Discrete(2), lambda v: bool(int(v)), lambda v: int(bool(v)))
    if kind == "integer":
        lo, hi = s.get("minimum"), s.get("maximum")
        lo = lo if lo is not None else (s["exclusiveMinimum"] + 1 if "exclusiveMinimum" in s else None)
        hi = hi if hi is not None else (s["exclusiveMaximum"] - 1 if "exclusiveMaximum" in s else None)
        if lo is not None and hi is not None and 0 < hi - lo + 1 <= _MAX_DISCRETE:
            return SpaceMap(spaces.Discrete(int(hi - lo + 1), start=int(lo)), int, lambda v: int(v))
        info = np.iinfo(np.int64)
        box: Any = spaces.Box(low=info.min if lo is None else int(lo), high=info.max if hi is None else int(hi),
                         shape=(), dtype=np.int64)
        return SpaceMap(box, lambda v: int(v), lambda v: np.asarray(v, dtype=np.int64))
    if kind == "number":
        box = spaces.Box(low=float(s.get("minimum", -np.inf)), high=float(s.get("maximum", np.inf)), shape=(),
                         dtype=np.float64)
        return SpaceMap(box, lambda v: float(v), lambda v: np.asarray(v, dtype=np.float64))
    if kind == "string":
        return SpaceMap(AnyText(int(s.get("maxLength", 4096)), min_length=int(s.get("minLength", 0))),
                        str, str)
    if kind == "array":
        items = _resolve(s.get("items") or {}, defs)
        n = s.get("minItems")
        if n is not None and n == s.get("maxItems") and items.get("type") in ("number", "integer"):
            dtype: Any = np.int64 if items["type"] == "integer" else np.float64
            lo = items.get("minimum", np.iinfo(np.int64).min if dtype is np.int64 else -np.inf)
            hi = items.get("maximum", np.iinfo(np.int64).max if dtype is np.int64 else np.inf)
            box = spaces.Box(low=lo, high=hi, shape=(int(n),), dtype=dtype)  # type: ignore[assignment]
            return SpaceMap(box, lambda v: np.asarray(v).tolist(), lambda v: np.asarray(v, dtype=dtype))
        return _json(s, defs)
    if kind == "object" or "properties" in s:
        props = s.get("properties") or {}
        if not props:
            return _json(s, defs)
        skip = _SKIP_OBS if observation else {"metadata"}
        fields = {name: space_for(p, defs=defs) for name, p in props.items() if name not in skip}
        required = set(s.get("required") or [])

        def to_env(v: dict[str, Any]) -> dict[str, Any]:
            return {k: m.to_env(v[k]) for k, m in fields.items() if k in v}

        def to_agent(v: dict[str, Any]) -> dict[str, Any]:
            out: dict[str, Any] = {}
            for k, m in fields.items():
                raw = v.get(k, (props[k] or {}).get("default"))
                out[k] = m.to_agent(raw) if raw is not None or k in required else _empty(m.space)
            return out

        return SpaceMap(spaces.Dict({k: m.space for k, m in fields.items()}), to_env, to_agent)
    return _json(s, defs)
