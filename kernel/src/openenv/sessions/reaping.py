"""The session manager's idle reaper and shutdown (``SessionManager``'s base class ``IdleReaping``).

A session with no connection that has been idle past ``idle_timeout_s`` is closed by a background
task started with ``start_reaper``; ``shutdown`` stops that task and closes every session, waiting
for closes already under way and the shared env thread.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from openenv.sessions.runner import EnvThread
from openenv.sessions.session import Session

__all__ = ["IdleReaping"]


class IdleReaping:
    """Idle reaping and shutdown for ``SessionManager`` (which defines the attributes below)."""

    idle_timeout_s: float | None
    _sessions: dict[str, Session]
    _reaper: asyncio.Task[None] | None
    _closing_tasks: set[asyncio.Task[Any]]
    _single: EnvThread | None

    if TYPE_CHECKING:  # defined by SessionManager
        async def close(self, session: Session, reason: str = "closed") -> None: ...

    def start_reaper(self) -> None:
        if self.idle_timeout_s is None or self._reaper is not None:
            return
        interval = max(min(self.idle_timeout_s / 4, 30.0), 0.05)
        self._reaper = asyncio.get_running_loop().create_task(self._reap_loop(interval))

    async def _reap_loop(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            await self.reap_idle()

    async def reap_idle(self) -> list[str]:
        """Close sessions with no connection that have been idle past the timeout."""
        if self.idle_timeout_s is None:
            return []
        now = time.monotonic()
        victims = [
            s for s in list(self._sessions.values())
            if s.ready and not s.connections and not s._closed
            and now - s.last_activity > self.idle_timeout_s and not s._lock.locked()
        ]
        for s in victims:
            await self.close(s, "idle timeout")
        return [s.id for s in victims]

    async def shutdown(self) -> None:
        """Stop the reaper and close every session."""
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None
        await asyncio.gather(*(self.close(s, "server shutdown") for s in list(self._sessions.values())),
                             return_exceptions=True)
        if self._closing_tasks:
            await asyncio.gather(*self._closing_tasks, return_exceptions=True)
        if self._single is not None:
            self._single.shutdown()
        self._single = None
