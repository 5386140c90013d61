"""Blocked event loop detection: a thread that notices the loop not ticking and says who blocks it.

An env declared ``BLOCKING = False`` (run inline) or an async env that calls ``time.sleep`` freezes
every session of the server. ``LoopWatchdog`` ticks a timestamp from the loop; a daemon thread
checks it, and when the loop has not ticked for ``threshold_s`` it logs (``openenv.server``, once
per stall) the session and env being run on the loop — found in the loop thread's stack, or in the
task awaiting the running one (an async env's call under a deadline runs in a task of its own on
Python 3.11) — and the line of code it is stuck in, then logs again when the loop recovers.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import sys
import threading
import time
from types import FrameType
from typing import Any

__all__ = ["DEFAULT_LOOP_BLOCK_S", "LoopWatchdog", "blocking_culprit", "report_process_exits"]

log = logging.getLogger("openenv.server")

#: Seconds without a loop tick before a stall is reported.
DEFAULT_LOOP_BLOCK_S = 1.0


def _session_in(frame: FrameType | None) -> str | None:
    """The id of the innermost session named ``session`` in ``frame`` and its callers."""
    f = frame
    while f is not None:
        candidate: Any = f.f_locals.get("session")
        sid = getattr(candidate, "id", None)
        if isinstance(sid, str) and hasattr(candidate, "runner"):
            return sid
        f = f.f_back
    return None


def _await_chain(coro: Any) -> list[FrameType]:
    """The frames of a suspended task's coroutine and of what it awaits, outermost first (bounded)."""
    frames: list[FrameType] = []
    for _ in range(64):
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is None:
            break
        frames.append(frame)
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return frames


def _session_awaiting(frame: FrameType, loop: asyncio.AbstractEventLoop) -> str | None:
    """The session whose task awaits the task running ``frame``.

    An async env's call under a deadline may run in a task of its own (``asyncio.wait_for`` on
    Python 3.11 wraps the coroutine in one), so the session's frames are not in the loop thread's
    stack: they are suspended in the task that waits for it. Read while the loop is blocked, so
    the tasks cannot change meanwhile.
    """
    outermost = None
    f: FrameType | None = frame
    while f is not None:  # the coroutine the running task drives is the outermost one in the stack
        if f.f_code.co_flags & inspect.CO_COROUTINE:
            outermost = f
        f = f.f_back
    if outermost is None:
        return None
    try:
        tasks = list(asyncio.all_tasks(loop))
    except RuntimeError:  # the task set changed while copied: no answer this time
        return None
    running = next((t for t in tasks if getattr(t.get_coro(), "cr_frame", None) is outermost), None)
    if running is None:
        return None
    for task in tasks:
        if task is running:
            continue
        chain = _await_chain(task.get_coro())
        if any(v is running for fr in chain for v in fr.f_locals.values()):
            for fr in reversed(chain):  # innermost first, as in the stack walk
                candidate: Any = fr.f_locals.get("session")
                sid = getattr(candidate, "id", None)
                if isinstance(sid, str) and hasattr(candidate, "runner"):
                    return sid
    return None


def blocking_culprit(frame: FrameType | None, env_name: str,
                     loop: asyncio.AbstractEventLoop | None = None) -> str:
    """What the loop thread is running: the innermost session in its stack (or, given ``loop``,
    in the task awaiting the running one) and the code line."""
    where = "unknown code"
    if frame is not None:
        where = f"{frame.f_code.co_filename}:{frame.f_lineno} in {frame.f_code.co_name}"
    session_id = _session_in(frame)
    if session_id is None and frame is not None and loop is not None:
        session_id = _session_awaiting(frame, loop)
    who = f"session {session_id} (env {env_name})" if session_id else f"no session (env {env_name})"
    return f"{who}, at {where}"


class LoopWatchdog:
    """Reports a blocked event loop (see the module docstring). ``start`` on the loop; ``stop``."""

    def __init__(self, env_name: str, threshold_s: float = DEFAULT_LOOP_BLOCK_S) -> None:
        self.env_name = env_name
        self.threshold_s = threshold_s
        self.stalls = 0
        self._last = time.monotonic()
        self._stop = threading.Event()
        self._ticker: asyncio.Task[None] | None = None
        self._thread: threading.Thread | None = None
        self._loop_thread = 0
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        self._loop_thread = threading.get_ident()
        self._loop = asyncio.get_running_loop()
        self._last = time.monotonic()
        self._ticker = self._loop.create_task(self._tick())
        self._thread = threading.Thread(target=self._watch, name="openenv-loop-watchdog", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.cancel()

    async def _tick(self) -> None:
        interval = min(self.threshold_s / 4, 0.25)
        while True:
            self._last = time.monotonic()
            await asyncio.sleep(interval)

    def _watch(self) -> None:
        stalled_since: float | None = None
        period = min(self.threshold_s / 4, 0.25)
        while not self._stop.wait(period):
            late = time.monotonic() - self._last
            if late > self.threshold_s and stalled_since is None:
                stalled_since = self._last
                self.stalls += 1
                frame = sys._current_frames().get(self._loop_thread)
                log.warning("the event loop has been blocked for %.1f s, stalling every session: %s. "
                            "An env with BLOCKING = False or an async env must never block; leave "
                            "BLOCKING at its default (a thread per session) for code that may.",
                            late, blocking_culprit(frame, self.env_name, self._loop))
            elif late <= self.threshold_s and stalled_since is not None:
                log.warning("the event loop is running again after %.1f s blocked",
                            time.monotonic() - stalled_since)
                stalled_since = None


def report_process_exits(env_name: str) -> None:
    """Make an env that ends the server process visible: a call of ``os._exit`` is logged first
    with the session, env and code line that made it (it skips ``atexit`` and every handler), and
    ``faulthandler`` prints every thread's stack on a fatal signal (env threads are named
    ``openenv-session-<id>``). Call once, in the serving process."""
    import faulthandler
    import os

    if not faulthandler.is_enabled():
        faulthandler.enable(all_threads=True)
    original = os._exit
    if getattr(original, "__openenv_reported__", False):
        return

    def _exit(code: int) -> Any:
        try:
            frame = sys._getframe(1)
            log.critical("os._exit(%s) called on thread %s (threads openenv-session-<id> run that "
                         "session's env) by %s: the server process ends now",
                         code, threading.current_thread().name, blocking_culprit(frame, env_name))
            for handler in logging.getLogger().handlers + log.handlers:
                handler.flush()
        finally:
            original(code)

    _exit.__openenv_reported__ = True  # type: ignore[attr-defined]
    os._exit = _exit  # type: ignore[assignment]
