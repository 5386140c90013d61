"""Bounded polling for tests: wait until a condition holds, without sleeping a fixed time.

``wait_until(predicate)`` calls ``predicate`` until it returns something truthy and returns that
value; when ``timeout_s`` runs out it returns the predicate's last (falsy) value, so both
``assert wait_until(...)`` and ``assert not wait_until(..., timeout_s=1)`` read naturally.
``wait_until_async`` is the same loop for code running on an event loop (it sleeps with
``asyncio.sleep``, so the server sharing that loop keeps running). ``await eventually(...)``
raises ``AssertionError`` with a description instead of returning a falsy value.

The pause between calls starts at ``interval_s`` and never grows past it: the helpers are for
tests, where a short fixed poll keeps the suite fast.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["eventually", "wait_until", "wait_until_async"]

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], *, timeout_s: float = 10.0, interval_s: float = 0.01) -> T:
    """Poll ``predicate`` until it is truthy (its value is returned) or ``timeout_s`` passes
    (its last value is returned). ``predicate`` is always called at least once."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        time.sleep(interval_s)


async def wait_until_async(predicate: Callable[[], T], *, timeout_s: float = 10.0,
                           interval_s: float = 0.01) -> T:
    """``wait_until`` for a coroutine: the pauses are ``asyncio.sleep``, never blocking the loop."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value or time.monotonic() >= deadline:
            return value
        await asyncio.sleep(interval_s)


async def eventually(predicate: Callable[[], Any], *, timeout_s: float = 10.0,
                     interval_s: float = 0.01, what: str | None = None) -> Any:
    """``wait_until_async`` that fails: raises ``AssertionError`` naming ``what`` when the
    condition never holds (for tests on an event loop, where a falsy return is easy to ignore)."""
    value = await wait_until_async(predicate, timeout_s=timeout_s, interval_s=interval_s)
    if not value:
        label = what or "the condition"
        raise AssertionError(f"{label} did not hold within {timeout_s:g}s (last value: {value!r})")
    return value
