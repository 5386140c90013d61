"""JSON-RPC 2.0 envelopes as OpenEnv 0.10 shapes them (docs/protocol.md §4.2).

Responses always carry ``jsonrpc``, ``id`` (``null`` when absent or unreadable) and either
``result`` (present even when ``null``) or ``error`` ``{code, message, data}`` (``data`` always
present). Requests are checked by hand, once, with messages that say what to fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "INVALID_REQUEST",
    "METHOD_NOT_FOUND",
    "PARSE_ERROR",
    "SERVER_ERROR",
    "Request",
    "RequestError",
    "error",
    "parse_request",
    "result",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
SERVER_ERROR = -32000

_KEYS = frozenset({"jsonrpc", "method", "params", "id"})


@dataclass(frozen=True)
class Request:
    """A valid request. ``is_notification`` is true when the ``id`` member is absent."""

    method: str
    params: dict[str, Any]
    id: str | int | None
    is_notification: bool


class RequestError(Exception):
    """A request that cannot be served; carries the JSON-RPC error to answer with."""

    def __init__(self, code: int, message: str, data: Any = None, request_id: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data, self.request_id = code, message, data, request_id

    def response(self) -> dict[str, Any]:
        return error(self.request_id, self.code, self.message, self.data)


def readable_id(obj: Any) -> str | int | None:
    """The request's id if it is a valid JSON-RPC id, else ``None``."""
    if not isinstance(obj, dict):
        return None
    rid = obj.get("id")
    if isinstance(rid, bool) or not isinstance(rid, str | int | None):
        return None
    return rid


def parse_request(obj: Any) -> Request:
    """Validate a decoded request object; ``RequestError(-32600)`` saying what is wrong otherwise."""
    if not isinstance(obj, dict):
        raise RequestError(INVALID_REQUEST, "Invalid request: a request must be a JSON object, got "
                           f"{_json_type(obj)}")
    rid = readable_id(obj)
    problems = []
    extra = sorted(set(obj) - _KEYS)
    if extra:
        problems.append(f"unexpected key(s) {', '.join(repr(k) for k in extra)} (allowed: jsonrpc, method, "
                        "params, id)")
    if "jsonrpc" not in obj:
        problems.append("'jsonrpc' is required and must be \"2.0\"")
    elif obj["jsonrpc"] != "2.0":
        problems.append(f"'jsonrpc' must be \"2.0\", got {obj['jsonrpc']!r}")
    method = obj.get("method")
    if not isinstance(method, str):
        problems.append("'method' is required and must be a string")
    params = obj.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        problems.append(f"'params' must be an object of named parameters, got {_json_type(params)}")
    if "id" in obj and obj["id"] is not None and rid is None:
        problems.append("'id' must be a string, an integer or null")
    if problems:
        raise RequestError(INVALID_REQUEST, "Invalid request: " + "; ".join(problems), request_id=rid)
    return Request(method=method, params=params, id=rid, is_notification="id" not in obj)  # type: ignore[arg-type]


def result(request_id: Any, value: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": value}


def error(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message, "data": data}}


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    return type(value).__name__
