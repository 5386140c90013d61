"""Envelopes of the ``/ws`` protocol: closed key sets, hand-written validation, error frames.

Promises (docs/protocol.md §3.3, §3.6, §11 B9):

* Envelope errors have exactly the shape upstream's Pydantic models produced (``type``, ``loc``,
  ``msg``, ``input``, ``url``), in Pydantic's order: declared fields first (``data``, then the
  negotiated ``kwargs``), then unknown keys in the order the client sent them.
* Validation is plain dict checks: the happy path costs one ``keys() <= allowed`` test and one
  ``isinstance``; the error list is only built for a frame that failed.
* Every error frame is ``{"type": "error", "data": {"message", "code", ...extra}}``.
"""

from __future__ import annotations

from typing import Any

from pydantic.version import version_short

from openenv.protocol import (
    EXTENSIONS,
    PROTOCOL,
    T_CLOSE,
    T_CLOSE_SESSION,
    T_ERROR,
    T_HELLO,
    T_MCP,
    T_OPEN,
    T_RESET,
    T_RESTORE,
    T_SNAPSHOT,
    T_STATE,
    T_STEP,
    T_STEP_BATCH,
    T_STEP_MANY,
    T_TASKS,
)

__all__ = [
    "BINARY_FRAME_MESSAGE",
    "DATA_OPTIONAL",
    "DATA_REQUIRED",
    "ENVELOPE_KEYS",
    "EXTENSIONS",
    "MAX_BATCH_ACTIONS",
    "PROTOCOL",
    "SESSIONS_KEYS",
    "SESSION_TARGETED",
    "SNAPSHOT_KEYS",
    "STEP_BATCH_KEYS",
    "batch_errors",
    "many_errors",
    "dict_type",
    "envelope_errors",
    "error_frame",
    "extra_forbidden",
    "invalid_message",
    "list_type",
    "missing",
    "not_an_object",
    "string_type",
]

# The vocabulary (frame types, protocol version, extension names) lives in ``openenv.protocol``;
# ``PROTOCOL`` and ``EXTENSIONS`` are re-exported here for the server.

#: Most actions one ``step_batch`` frame may carry (advertised in the ``hello`` reply). It bounds
#: how long one frame can hold the connection, not the session: a client sends several frames.
MAX_BATCH_ACTIONS = 1024

#: Envelope keys of ``step_batch`` (added to a connection's key sets once negotiated).
STEP_BATCH_KEYS = frozenset({"type", "data"})

#: Frame types of the ``sessions`` extension (several sessions multiplexed over one connection):
#: ``open`` a session, ``close_session`` one, ``step_many`` (one step in each of several sessions).
SESSIONS_KEYS: dict[str, frozenset[str]] = {
    T_OPEN: frozenset({"type", "data"}),
    T_CLOSE_SESSION: frozenset({"type", "data"}),
    T_STEP_MANY: frozenset({"type", "data"}),
}
#: Frame types of the ``snapshot`` extension: ``snapshot`` a session, ``restore`` one from a snapshot.
SNAPSHOT_KEYS: dict[str, frozenset[str]] = {
    T_SNAPSHOT: frozenset({"type"}),
    T_RESTORE: frozenset({"type", "data"}),
}
#: Frame types that may name their session with ``session_id`` once ``sessions`` is granted.
SESSION_TARGETED = frozenset({T_RESET, T_STEP, T_STATE, T_STEP_BATCH, T_SNAPSHOT, T_RESTORE})

#: Closed key sets of the upstream dialect. ``id`` (after ``ids``) and ``kwargs`` on ``step``
#: (after ``step_kwargs``) are added per connection once negotiated. ``hello`` is ours: upstream
#: peers never send it, so it may always carry an ``id``.
ENVELOPE_KEYS: dict[str, frozenset[str]] = {
    T_RESET: frozenset({"type", "data"}),
    T_STEP: frozenset({"type", "data"}),
    T_STATE: frozenset({"type"}),
    T_CLOSE: frozenset({"type"}),
    T_MCP: frozenset({"type", "data"}),
    T_HELLO: frozenset({"type", "data", "id"}),
}

#: Frame types whose ``data`` must be present and an object.
DATA_REQUIRED = frozenset({T_STEP, T_MCP, T_STEP_BATCH, T_CLOSE_SESSION, T_STEP_MANY, T_TASKS, T_RESTORE})
#: Frame types whose ``data`` may be absent (default ``{}``) but must be an object when present.
DATA_OPTIONAL = frozenset({T_RESET, T_HELLO, T_OPEN})

BINARY_FRAME_MESSAGE = "Binary frames are not supported; send JSON text frames"

# Pydantic's documentation links, as upstream's error lists carried them.
_URL = f"https://errors.pydantic.dev/{version_short()}/v/"


def error_frame(message: str, code: str, **extra: Any) -> dict[str, Any]:
    """An error frame: ``{"type":"error","data":{"message","code",...extra}}``."""
    return {"type": T_ERROR, "data": {"message": message, "code": code, **extra}}


def invalid_message(errors: list[dict[str, Any]]) -> dict[str, Any]:
    """The recoverable ``VALIDATION_ERROR`` frame with its Pydantic-style ``errors``."""
    return error_frame("Invalid message", "VALIDATION_ERROR", errors=errors)


def not_an_object(frame: Any) -> dict[str, Any]:
    """Reply to valid JSON that is not an object (B9: recoverable, not upstream's fatal error)."""
    return invalid_message([
        {"type": "model_type", "loc": [], "msg": "Input should be a JSON object", "input": frame,
         "url": _URL + "model_type"},
    ])


def _err(kind: str, loc: list[Any], msg: str, value: Any) -> dict[str, Any]:
    return {"type": kind, "loc": loc, "msg": msg, "input": value, "url": _URL + kind}


def missing(loc: list[Any], value: Any) -> dict[str, Any]:
    return _err("missing", loc, "Field required", value)


def dict_type(loc: list[Any], value: Any) -> dict[str, Any]:
    return _err("dict_type", loc, "Input should be a valid dictionary", value)


def list_type(loc: list[Any], value: Any) -> dict[str, Any]:
    return _err("list_type", loc, "Input should be a valid list", value)


def string_type(loc: list[Any], value: Any) -> dict[str, Any]:
    return _err("string_type", loc, "Input should be a valid string", value)


def extra_forbidden(loc: list[Any], value: Any) -> dict[str, Any]:
    return _err("extra_forbidden", loc, "Extra inputs are not permitted", value)


def envelope_errors(frame: dict[str, Any], ftype: str, allowed: frozenset[str]) -> list[dict[str, Any]]:
    """Every envelope error of ``frame`` (of type ``ftype``), in Pydantic's order.

    Called only after the fast check failed, so it may be thorough rather than quick.
    """
    errors: list[dict[str, Any]] = []
    if "data" in allowed:
        if "data" not in frame:
            if ftype in DATA_REQUIRED:
                errors.append(missing(["data"], frame))
        elif not isinstance(frame["data"], dict):
            errors.append(dict_type(["data"], frame["data"]))
    if "kwargs" in allowed and "kwargs" in frame and not isinstance(frame["kwargs"], dict):
        errors.append(dict_type(["kwargs"], frame["kwargs"]))
    errors.extend(extra_forbidden([key], value) for key, value in frame.items() if key not in allowed)
    return errors


def batch_errors(data: dict[str, Any], limit: int) -> list[dict[str, Any]]:
    """Errors of a ``step_batch`` frame's ``data`` (empty when valid): exactly the key ``actions``,
    a list of 1 to ``limit`` items. The actions themselves are validated one by one when run."""
    errors = _list_errors(data, "actions", limit, T_STEP_BATCH)
    errors.extend(extra_forbidden(["data", key], value) for key, value in data.items() if key != "actions")
    return errors


def _list_errors(data: dict[str, Any], key: str, limit: int, frame: str) -> list[dict[str, Any]]:
    """Errors of ``data[key]`` as a list of 1 to ``limit`` items (empty when it is one)."""
    value = data.get(key, _MISSING)
    if value is _MISSING:
        return [missing(["data", key], data)]
    if type(value) is not list:
        return [list_type(["data", key], value)]
    if not value:
        return [_err("too_short", ["data", key], "List should have at least 1 item after validation, not 0", value)]
    if len(value) > limit:
        return [_err("too_long", ["data", key],
                     f"List should have at most {limit} items after validation, not {len(value)}; "
                     f"send the rest in another {frame} frame", f"<list of {len(value)} items>")]
    return []


def many_errors(data: dict[str, Any], limit: int) -> list[dict[str, Any]]:
    """Errors of a ``step_many`` frame's ``data`` (empty when valid): exactly the key ``steps``, a
    list of 1 to ``limit`` objects, each exactly ``{"session_id": str, "action": object}``. Which
    sessions exist, and the actions themselves, are checked per step when run."""
    steps = data.get("steps", _MISSING)
    if (type(steps) is list and 0 < len(steps) <= limit and len(data) == 1
            and all(type(e) is dict and len(e) == 2 and type(e.get("session_id")) is str
                    and type(e.get("action")) is dict for e in steps)):
        return []  # the common case, checked without building anything
    errors = _list_errors(data, "steps", limit, T_STEP_MANY)
    if not errors:
        for i, entry in enumerate(steps):
            loc = ["data", "steps", i]
            if type(entry) is not dict:
                errors.append(dict_type(loc, entry))
                continue
            if "session_id" not in entry:
                errors.append(missing([*loc, "session_id"], entry))
            elif type(entry["session_id"]) is not str:
                errors.append(string_type([*loc, "session_id"], entry["session_id"]))
            if "action" not in entry:
                errors.append(missing([*loc, "action"], entry))
            elif type(entry["action"]) is not dict:
                errors.append(dict_type([*loc, "action"], entry["action"]))
            errors.extend(extra_forbidden([*loc, key], value) for key, value in entry.items()
                          if key not in ("session_id", "action"))
    errors.extend(extra_forbidden(["data", key], value) for key, value in data.items() if key != "steps")
    return errors


_MISSING: Any = object()
