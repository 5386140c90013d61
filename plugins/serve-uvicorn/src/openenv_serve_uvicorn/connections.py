"""Connections that never speak are shed (the hardened server's HTTP protocol; docs/security.md).

* **Header timeout.** A connection that has not completed a request's headers (nor upgraded to a
  WebSocket) within ``header_timeout_s`` of connecting is closed.
* **Connection cap.** At most ``max_connections`` connections are held. When a new one would pass
  the cap, the oldest HTTP connection that has not yet sent a request is closed to make room (so a
  flood of silent sockets never locks out ``/health`` or a real client). A connection that has
  spoken, and every WebSocket (which carries a live session), is never shed to admit a new one:
  when no silent connection is left, the *new* one is refused with ``503`` ``CAPACITY_REACHED``
  (and ``Retry-After``) and closed.
* **Header bytes, while they are read.** With the httptools parser, the bytes of the header block
  being read are counted as they arrive — only that block: complete requests pipelined before it
  in the same socket read are not counted against it. Past
  ``max_header_bytes`` plus a request-line allowance the connection gets ``431``
  ``HEADERS_TOO_LARGE`` and is closed, so a huge header value or millions of headers are never held
  (``openenv.guard`` then checks the exact size and count of the headers that were accepted). The
  pure-Python h11 parser bounds the same block itself (``h11_max_incomplete_event_size``).

Every shed connection is counted, and logged at most once a second (``openenv.server``).
"""

from __future__ import annotations

import logging
import time
from typing import Any

__all__ = ["REQUEST_LINE_ALLOWANCE", "guarded_protocol"]

log = logging.getLogger("openenv.server")

#: Bytes allowed for the request line and header framing on top of ``max_header_bytes``.
REQUEST_LINE_ALLOWANCE = 16 * 1024


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
    """Whether ``proto`` is one of ours that has not yet started a request nor handed its
    transport to a WebSocket.

    Only our HTTP protocol counts: uvicorn's WebSocket protocols sit in the same connection set
    with no ``cycle`` and no ``_oe_served``, and must never look silent (they hold live sessions).
    """
    if not getattr(proto, "_oe_guarded", False):
        return False
    transport = getattr(proto, "transport", None)
    if transport is None or transport.is_closing():
        return False
    if transport.get_protocol() is not proto:
        return False  # upgraded: the WebSocket protocol owns it now
    return getattr(proto, "cycle", None) is None and not getattr(proto, "_oe_served", False)


def _block_bytes(data: bytes, began: bool, body_seen: int) -> int:
    """Bytes of ``data`` (one socket read, parsed) that belong to the header block still open.

    When that block continued from an earlier read, all of ``data`` is its. When it began in this
    read, the complete requests before it are not its: the open block holds no blank line (one
    would have ended it), so it lies after the read's last ``\\r\\n\\r\\n``; what lies there besides
    it can only be the tail of an earlier request's body, at most ``body_seen`` bytes. Exact for
    pipelined requests without bodies, never more than the block for others (whose later reads
    count in full, so an oversized block is still refused within one more read).
    """
    if not began:
        return len(data)
    end = data.rfind(b"\r\n\r\n")
    tail = len(data) - (end + 4 if end >= 0 else 0)
    return max(0, tail - body_seen)


def _headers_reply(limit: int) -> bytes:
    """The raw ``431`` a connection gets whose header block passes ``limit`` while being read."""
    body = (b'{"detail":"Request headers passed %d bytes before they ended; this server accepts at most '
            b'%d bytes of headers (max_header_bytes). Send fewer or smaller headers.",'
            b'"code":"HEADERS_TOO_LARGE"}' % (limit + REQUEST_LINE_ALLOWANCE, limit))
    return (b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: application/json\r\n"
            b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))


def _capacity_reply(max_connections: int) -> bytes:
    """The raw ``503`` a refused connection gets (the body of the other capacity refusals)."""
    body = (b'{"detail":"The server holds its limit of %d connections, none of them silent '
            b'(max_connections); retry shortly.","code":"CAPACITY_REACHED"}' % max_connections)
    return (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\n"
            b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(body), body))


def guarded_protocol(base: type[Any], *, header_timeout_s: float | None, max_connections: int | None,
                     max_header_bytes: int | None = None) -> type[Any]:
    """A subclass of uvicorn's HTTP protocol ``base`` applying the limits above."""
    shed = _Shed()
    # Only the httptools protocol reports where a header block starts and ends.
    count_headers = max_header_bytes is not None and hasattr(base, "on_headers_complete")
    header_cap = (max_header_bytes or 0) + REQUEST_LINE_ALLOWANCE

    class GuardedProtocol(base):  # type: ignore[misc, valid-type]
        openenv_shed = shed
        _oe_guarded = True

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._oe_since = time.monotonic()
            self._oe_served = False
            self._oe_in_headers = True  # until the first request's headers are complete
            self._oe_header_bytes = 0
            self._oe_began = False  # a request began in the socket read being parsed
            self._oe_body_seen = 0  # body bytes the parser handed over from that read
            if header_timeout_s is not None:
                self._oe_timer = self.loop.call_later(header_timeout_s, self._oe_timeout)
            if max_connections is not None and len(self.connections) > max_connections:
                self._oe_make_room()

        def _oe_timeout(self) -> None:
            if _silent(self):
                shed.note(f"no request headers within {header_timeout_s} s")
                self.transport.close()

        def _oe_make_room(self) -> None:
            assert max_connections is not None  # only called under a cap
            idle = [p for p in self.connections if p is not self and _silent(p)]
            if idle:
                victim = min(idle, key=lambda p: p._oe_since)
                shed.note(f"connection cap {max_connections} reached; closed the oldest silent one")
                victim.transport.close()
                return
            shed.note(f"connection cap {max_connections} reached and every connection is busy; "
                      "refused the new one")
            # Answered before its request is read: any HTTP client (and a WebSocket handshake)
            # reads it as the reply to whatever it sends.
            self.transport.write(_capacity_reply(max_connections))
            self.transport.close()

        if count_headers:
            def data_received(self, data: bytes) -> None:
                # Counted after the parser has seen the chunk (at most one socket read, ~256 KiB),
                # so a chunk that completes small headers and carries body bytes is never refused.
                self._oe_began = False
                self._oe_body_seen = 0
                super().data_received(data)
                if self._oe_in_headers and not self.transport.is_closing():
                    self._oe_header_bytes += _block_bytes(data, self._oe_began, self._oe_body_seen)
                    if self._oe_header_bytes > header_cap:
                        shed.note(f"request headers passed {header_cap} bytes (max_header_bytes)")
                        self.transport.write(_headers_reply(max_header_bytes or 0))
                        self.transport.close()

            def on_message_begin(self) -> None:
                self._oe_in_headers = True
                self._oe_header_bytes = 0
                self._oe_began = True
                super().on_message_begin()

            def on_body(self, body: bytes) -> None:
                self._oe_body_seen += len(body)
                super().on_body(body)

            def on_headers_complete(self) -> None:
                self._oe_in_headers = False
                super().on_headers_complete()

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
