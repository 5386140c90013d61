"""Running a coroutine to completion from sync code, also when the caller already sits inside an
event loop (then on a loop of a thread of its own): verifiers' scoring and ORS's task methods are
async, our env's ``reset``/``step`` are called sync."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["run_in_thread", "run_sync"]

T = TypeVar("T")


def run_sync(work: Any) -> Any:
    """The value of ``work``: itself, or, when awaitable, awaited to completion (here, or on a
    thread of its own when this thread already runs an event loop)."""
    if not inspect.isawaitable(work):
        return work

    async def wait() -> Any:
        return await work

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(wait())
    return run_in_thread(wait())


def run_in_thread(work: Coroutine[Any, Any, T]) -> T:
    """Run ``work`` on a new event loop of a thread of its own (a sync caller inside someone's loop)."""
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(work)
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, name="openenv-import-call", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    value: T = box["value"]
    return value
