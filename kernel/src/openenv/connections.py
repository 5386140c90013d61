"""Connections that never speak are shed (``serve``'s HTTP protocol; docs/security.md).

* **Header timeout.** A connection that has not completed a request's headers (nor upgraded to a
  WebSocket) within ``header_timeout_s`` of connecting is closed.
* **Connection cap.** At most ``max_connections`` connections are held. When a new one would pass
  the cap, the oldest connection that has not yet sent a request is closed to make room (so a
  flood of silent sockets never locks out ``/health`` or a real client); only when every held
  connection is busy is the new one closed instead.
* **Descriptors.** ``raise_fd_limit`` raises the soft ``RLIMIT_NOFILE`` to the hard limit at start.

Every shed connection is counted, and logged at most once a second (``openenv.server``).
"""

from __future__ import annotations

import logging
import time
from typing import Any

__all__ = ["DEFAULT_HEADER_TIMEOUT_S", "DEFAULT_MAX_CONNECTIONS", "guarded_protocol", "raise_fd_limit"]

log = logging.getLogger("openenv.server")

#: Seconds a new connection has to complete its first request's headers.
DEFAULT_HEADER_TIMEOUT_S = 10.0
#: Connections held at once (HTTP and WebSocket together).
DEFAULT_MAX_CONNECTIONS = 2048


class _Shed:
    """Counts shed connections and rate-limits the log line about them."""

    def __init__(self) -> None:
        self.count = 0
        self._last_log = 0.0

    def note(self, why: str) -> None:
        self.count += 1
        now = time.monotonic()
        if now - self._last_log >= 1.0:
            self._last_log = now
            log.warning("shed a connection (%s); %d shed so far", why, self.count)


def _silent(proto: Any) -> bool:
    """Whether ``proto`` has not yet started a request nor handed its transport to a WebSocket."""
    transport = getattr(proto, "transport", None)
    if transport is None or transport.is_closing():
        return False
    if transport.get_protocol() is not proto:
        return False  # upgraded: the WebSocket protocol owns it now
    return getattr(proto, "cycle", None) is None and not getattr(proto, "_oe_served", False)


def guarded_protocol(base: type[Any], *, header_timeout_s: float | None, max_connections: int | None) -> type[Any]:
    """A subclass of uvicorn's HTTP protocol ``base`` applying the limits above."""
    shed = _Shed()

    class GuardedProtocol(base):  # type: ignore[misc, valid-type]
        openenv_shed = shed

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._oe_since = time.monotonic()
            self._oe_served = False
            if header_timeout_s is not None:
                self._oe_timer = self.loop.call_later(header_timeout_s, self._oe_timeout)
            if max_connections is not None and len(self.connections) > max_connections:
                self._oe_make_room()

        def _oe_timeout(self) -> None:
            if _silent(self):
                shed.note(f"no request headers within {header_timeout_s} s")
                self.transport.close()

        def _oe_make_room(self) -> None:
            idle = [p for p in self.connections if p is not self and _silent(p)]
            if idle:
                victim = min(idle, key=lambda p: getattr(p, "_oe_since", 0.0))
                shed.note(f"connection cap {max_connections} reached; closed the oldest silent one")
                victim.transport.close()
                return
            shed.note(f"connection cap {max_connections} reached and every connection is busy")
            self.transport.close()

        def on_response_complete(self) -> None:
            self._oe_served = True
            super().on_response_complete()

        def connection_lost(self, exc: Exception | None) -> None:
            timer = getattr(self, "_oe_timer", None)
            if timer is not None:
                timer.cancel()
            super().connection_lost(exc)

    GuardedProtocol.__name__ = f"Guarded{base.__name__}"
    return GuardedProtocol


def raise_fd_limit() -> tuple[int, int] | None:
    """Raise the soft descriptor limit to the hard one; the (old, new) soft limits, or None."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not POSIX
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if target <= soft:
        return soft, soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError):
        return soft, soft
    log.info("raised the open-file limit from %d to %d", soft, target)
    return soft, target
