"""Request bodies of ``/reset`` and ``/step``: one parse, hand-written checks, exact 422s.

The rules are those of ``models.ResetRequest`` and ``models.StepRequest`` (upstream's): ``action``
an object; ``timeout_s`` a number ``> 0`` or null; ``request_id`` and ``episode_id`` strings of at
most 255 characters or null; ``seed`` an integer ``>= 0`` or null; other keys allowed. A body of
the shape clients send (exact JSON types, values in range) is checked here by hand and never
reaches Pydantic. Anything else (a wrong type, a value out of range, a lax coercion such as
``"seed": "5"``) is handed to the Pydantic model, so its result, or its 422 body, is exactly what
the model gives. The dicts returned are laid out as ``model_dump(exclude_unset=True)`` lays them
out: declared fields in declaration order, then the extra keys in body order.
"""

from __future__ import annotations

from typing import Any

import orjson
from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from openenv import limits, wire
from openenv_transport_rest.asgi import Reply, json_reply
from openenv_transport_rest.models import ResetRequest, StepRequest

__all__ = ["MISSING_BODY", "body_errors", "parse_json", "reset_data", "step_parts"]

_MAX_ID = 255
_ABSENT: Any = object()
_STEP_FIELDS = frozenset({"action", "timeout_s", "request_id"})
_RESET_FIELDS = frozenset({"seed", "episode_id"})
_loads = orjson.loads
_DecodeError = orjson.JSONDecodeError
_DEPTH_SCAN_MIN = 2 * limits.MAX_JSON_DEPTH

#: FastAPI's (upstream's) 422 for a missing required body.
MISSING_BODY: dict[str, Any] = {"detail": [{"type": "missing", "loc": ["body"], "msg": "Field required",
                                            "input": None}]}


def parse_json(body: bytes) -> Any:
    """The parsed body; ``None`` when it is empty or only whitespace; else a 422 ``json_invalid``."""
    try:
        obj = _loads(body)
        if len(body) >= _DEPTH_SCAN_MIN:
            limits.check_parsed(body, obj)
        return obj
    except limits.JSONTooDeepError:
        pass
    except _DecodeError:
        if not body.strip():
            return None
    try:
        return limits.loads(body)  # raises again, with the standard library's message and position
    except wire.JSONDecodeError as exc:
        # FastAPI's shape for an undecodable body (upstream answers 422, not 400 or 500).
        raise Reply(*json_reply({"detail": [{"type": "json_invalid", "loc": ["body", exc.pos],
                                             "msg": "JSON decode error", "input": {},
                                             "ctx": {"error": exc.msg}}]}, 422)) from None


def body_errors(exc: PydanticValidationError) -> list[dict[str, Any]]:
    """Pydantic errors as FastAPI reports body errors: under ``"body"``, without doc URLs."""
    errors = wire.validation_errors(exc, ("body",))
    for err in errors:
        err.pop("url", None)
    return errors


def _validated(model: type[BaseModel], data: Any) -> BaseModel:
    try:
        return model.model_validate(data)
    except PydanticValidationError as exc:
        raise Reply(*json_reply({"detail": body_errors(exc)}, 422)) from None


def _short_str(value: Any) -> bool:
    return value is None or (type(value) is str and len(value) <= _MAX_ID)


def step_parts(data: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(action, extra)`` of a parsed, present ``/step`` body; ``extra`` is every other key.

    Raises ``Reply`` 422 exactly as ``StepRequest`` validation does.
    """
    if type(data) is dict:
        action = data.get("action")
        if type(action) is dict:
            if len(data) == 1:  # the usual body: {"action": {...}}
                return action, {}
            timeout = data.get("timeout_s", _ABSENT)
            request_id = data.get("request_id", _ABSENT)
            if (timeout is _ABSENT or timeout is None or (type(timeout) is float and timeout > 0)) and (
                    request_id is _ABSENT or _short_str(request_id)):
                extra: dict[str, Any] = {}
                if timeout is not _ABSENT:
                    extra["timeout_s"] = timeout
                if request_id is not _ABSENT:
                    extra["request_id"] = request_id
                for key, value in data.items():
                    if key not in _STEP_FIELDS:
                        extra[key] = value
                return action, extra
    body: Any = _validated(StepRequest, data)
    return body.action, body.model_dump(exclude_unset=True, exclude={"action"})


def reset_data(data: Any) -> dict[str, Any]:
    """The ``/reset`` arguments of a parsed body (``None`` = no body = ``{}``).

    Raises ``Reply`` 422 exactly as ``ResetRequest`` validation does.
    """
    if data is None:
        return {}
    if type(data) is dict:
        if not data:
            return {}
        seed = data.get("seed")
        if (seed is None or (type(seed) is int and seed >= 0)) and _short_str(data.get("episode_id")):
            out: dict[str, Any] = {}
            for key in ("seed", "episode_id"):
                if key in data:
                    out[key] = data[key]
            for key, value in data.items():
                if key not in _RESET_FIELDS:
                    out[key] = value
            return out
    return _validated(ResetRequest, data).model_dump(exclude_unset=True)
