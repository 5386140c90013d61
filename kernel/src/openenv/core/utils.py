"""``openenv.core.utils``: upstream's small helpers env and client code import."""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections.abc import Coroutine
from typing import Any, TypeVar
from urllib.parse import urlsplit

__all__ = ["convert_to_ws_url", "run_async_safely"]

T = TypeVar("T")


def run_async_safely(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from synchronous code, whether or not this thread runs a loop.

    Without a running loop it uses ``asyncio.run``; inside one (where blocking on the same loop
    would deadlock) it runs the coroutine on a fresh loop in a helper thread and waits for it.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="openenv-run-async") as pool:
        return pool.submit(asyncio.run, coro).result()


def convert_to_ws_url(url: str) -> str:
    """``http(s)://`` → ``ws(s)://`` (no scheme → ``ws://``), trailing ``/`` removed; no ``/ws`` added."""
    url = url.strip().rstrip("/")
    scheme = urlsplit(url).scheme.lower() if "://" in url else ""
    if scheme == "http":
        return "ws://" + url[len("http://"):]
    if scheme == "https":
        return "wss://" + url[len("https://"):]
    if scheme in ("ws", "wss"):
        return url
    return "ws://" + url
