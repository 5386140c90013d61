"""Limits every transport applies to what a client sends (docs/security.md, "Security and limits").

* ``loads`` — JSON parsing with a nesting limit (``MAX_JSON_DEPTH``): deeper input is refused with
  ``JSONTooDeepError``, a ``json.JSONDecodeError``, so every transport's existing "invalid JSON"
  answer applies (a WebSocket error frame that keeps the session, a JSON-RPC parse error, a 422),
  and nothing deep ever reaches validation or the encoding of a validation error.
* ``BodyBudget`` — the total bytes of request bodies being read at once, across connections. The
  WebSocket transports hold their large messages (``BUDGETED_MESSAGE_BYTES`` and up) against the same
  budget while they parse and answer them: past it a message is refused with a ``CAPACITY_REACHED``
  error (the session is kept) instead of more memory.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

__all__ = ["BUDGETED_MESSAGE_BYTES", "MAX_BODY_BUDGET_BYTES", "MAX_JSON_DEPTH", "BodyBudget", "JSONTooDeepError",
           "check_depth", "check_parsed", "loads"]

#: Deepest nesting of arrays/objects accepted in a request or frame.
MAX_JSON_DEPTH = 64

#: Bytes of in-limit request bodies the server holds at once while reading them (all connections).
MAX_BODY_BUDGET_BYTES = 256 * 1024 * 1024

#: WebSocket messages this long (characters) or longer are held against the ``BodyBudget`` while
#: they are handled; shorter ones (every ordinary step) are not counted.
BUDGETED_MESSAGE_BYTES = 64 * 1024


class JSONTooDeepError(json.JSONDecodeError):
    """The JSON nests arrays/objects deeper than the limit."""

    def __init__(self, limit: int, doc: str = "") -> None:
        super().__init__(f"JSON nested deeper than {limit} levels of arrays/objects; send a flatter "
                         "payload", doc, 0)
        self.limit = limit


def check_depth(obj: Any, limit: int = MAX_JSON_DEPTH) -> None:
    """Raise ``JSONTooDeepError`` if ``obj`` nests lists/dicts deeper than ``limit`` (iterative)."""
    stack: list[tuple[Any, int]] = [(obj, 1)]
    while stack:
        value, depth = stack.pop()
        if type(value) is dict:
            children: Any = value.values()
        elif type(value) is list:
            children = value
        else:
            continue
        if depth > limit:
            raise JSONTooDeepError(limit)
        for child in children:
            if type(child) is dict or type(child) is list:
                stack.append((child, depth + 1))


def _may_be_deep(data: str | bytes, limit: int) -> bool:
    """False when ``data`` cannot nest deeper than ``limit`` (too few brackets): the common case,
    decided by two C-speed counts instead of a walk over the parsed value."""
    if len(data) < 2 * limit:
        return False
    if isinstance(data, str):
        return data.count("[") + data.count("{") > limit
    return data.count(b"[") + data.count(b"{") > limit


def check_parsed(data: str | bytes, obj: Any, max_depth: int = MAX_JSON_DEPTH) -> None:
    """After a fast parse of ``data`` into ``obj``: ``JSONTooDeepError`` if it nests too deep."""
    if _may_be_deep(data, max_depth):
        check_depth(obj, max_depth)


def loads(data: str | bytes, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Parse JSON (orjson), refusing nesting deeper than ``max_depth`` with ``JSONTooDeepError``.

    Other invalid input raises ``json.JSONDecodeError`` with the standard library's message.
    """
    try:
        obj = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        if "recursion" in str(exc).lower():
            raise JSONTooDeepError(max_depth) from None
        text = data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data
        try:
            json.loads(text)  # raises with the familiar message
        except RecursionError:
            raise JSONTooDeepError(max_depth) from None
        raise  # pragma: no cover - orjson stricter than json (e.g. NaN tokens)
    if _may_be_deep(data, max_depth):
        check_depth(obj, max_depth)
    return obj


class BodyBudget:
    """Bytes of request bodies being read right now, bounded across every connection.

    ``take(n)`` reserves ``n`` more bytes for a body being read (False when the budget is spent:
    answer 503 and stop reading); ``give(n)`` returns them once the body is parsed or dropped.
    """

    def __init__(self, limit: int = MAX_BODY_BUDGET_BYTES) -> None:
        self.limit = limit
        self.used = 0

    def take(self, n: int) -> bool:
        if self.used + n > self.limit:
            return False
        self.used += n
        return True

    def give(self, n: int) -> None:
        self.used = max(0, self.used - n)

    def busy_detail(self, n: int) -> str:
        """What a refused message of ``n`` bytes is told (``CAPACITY_REACHED``)."""
        return (f"The server is holding {self.used} bytes of large requests and messages, its limit "
                f"({self.limit}, max_body_budget_bytes); this {n}-byte message was not handled. Retry "
                "shortly, or send smaller messages.")
