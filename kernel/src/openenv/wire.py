"""JSON encoding for the wire: one parse per inbound frame, one serialisation per reply.

orjson does the work; when it rejects a text we re-parse with the standard library only to get
upstream's exact error message (``Expecting value: line 1 column 1 (char 0)``) — the slow path runs
only for broken input.
"""

from __future__ import annotations

import json
import math
from typing import Any

import orjson
from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

__all__ = ["JSONDecodeError", "dumps", "dumps_bytes", "loads", "validation_errors"]

JSONDecodeError = json.JSONDecodeError

_OPTS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS


def _default(obj: Any) -> Any:
    if isinstance(obj, BaseModel):
        return obj.model_dump()
    if isinstance(obj, set | frozenset | tuple):
        return list(obj)
    if isinstance(obj, bytes):
        return obj.decode("utf-8", errors="replace")
    tolist = getattr(obj, "tolist", None)
    if callable(tolist):  # numpy scalars/arrays, torch tensors
        return tolist()
    raise TypeError(f"Object of type {type(obj).__name__} is not JSON serializable")


def dumps_bytes(obj: Any) -> bytes:
    """Compact JSON as bytes."""
    return orjson.dumps(obj, default=_default, option=_OPTS)


def dumps(obj: Any) -> str:
    """Compact JSON as text."""
    return orjson.dumps(obj, default=_default, option=_OPTS).decode()


def loads(data: str | bytes) -> Any:
    """Parse JSON; raises ``json.JSONDecodeError`` with the standard library's message."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
        json.loads(text)  # raises with the familiar message
        raise  # pragma: no cover - orjson stricter than json (e.g. NaN tokens)


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    return str(value)


def validation_errors(exc: PydanticValidationError, loc_prefix: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    """Pydantic errors as JSON-safe dicts (``type, loc, msg, input, ctx?, url?``)."""
    out = []
    for err in exc.errors(include_url=True):
        item: dict[str, Any] = {
            "type": err["type"],
            "loc": [*loc_prefix, *err["loc"]],
            "msg": err["msg"],
            "input": _plain(err.get("input")),
        }
        if "ctx" in err:
            item["ctx"] = _plain(err["ctx"])
        if "url" in err:
            item["url"] = err["url"]
        out.append(item)
    return out
