"""The load generator's hot loop: many non-blocking sockets, one request in flight each, on epoll.

Why not asyncio: measured on this project's 2-core VM, an asyncio ``Protocol`` client cost about
30 µs of CPU per step — as much as the bare-echo server it was loading — because every event
goes through the loop's handle queue, the transport and a callback. This loop does one
``epoll.poll`` per batch of ready sockets and, per reply, one ``recv``, an in-place frame parse
and one ``send``: a third of that. The load generator must be cheaper than the cheapest server
it loads, or it measures itself.

Promises: every loop is bounded in time (warm-up + window + drain deadlines) and in count
(``max_steps``); a connection the server drops is counted as an error (unless we were closing)
and never touched again; server CPU/memory are read from ``/proc`` at the window's exact edges.
"""

from __future__ import annotations

import collections
import json
import random
import select
import time
from collections.abc import Callable
from typing import Any

from bench.clientwire import CLOSE_CODE_NORMAL, WsState, encode_frame, parse_frame, parse_response, ws_message

__all__ = ["BATCH_ERROR", "BATCH_PREFIX", "OBS_PREFIX", "HttpConn", "Loop", "close_ws", "is_observation"]

OBS_PREFIX = b'{"type":"observation"'
#: A ``step_batch`` reply (our extension) starts with this; an element holding this failed.
BATCH_PREFIX = b'{"type":"observations"'
BATCH_ERROR = b'{"error":'
MAX_LATENCY_SAMPLES = 2_000_000
MAX_ERROR_SAMPLES = 5
perf_counter = time.perf_counter


def is_observation(payload: bytes) -> bool:
    """Cheap check first (our and upstream's replies start with it), a parse only otherwise."""
    if payload.startswith(OBS_PREFIX):
        return True
    try:
        frame = json.loads(payload)
    except ValueError:
        return False
    return isinstance(frame, dict) and frame.get("type") == "observation"


class HttpConn:
    """One keep-alive HTTP connection owned by the engine."""

    __slots__ = ("alive", "buf", "fd", "replies", "request", "sent_at", "sid", "sock")

    def __init__(self, sock: Any, request: bytes, sid: str | None) -> None:
        self.sock = sock
        self.fd = sock.fileno()
        self.buf = b""
        self.request = request
        self.sid = sid
        self.sent_at = 0.0
        self.replies = 0
        self.alive = True


class Loop:
    """Counters shared by the run methods, plus the error samples."""

    def __init__(self, on_edge: Callable[[str], None] | None = None) -> None:
        self.count = 0
        self.errors = 0
        self.samples: list[str] = []
        self.latencies: list[float] = []
        self.measuring = False
        self._stop_count = 0
        self.stopping = False
        self.inflight = 0
        self.on_edge = on_edge or (lambda _edge: None)

    def _advance_window(self, now: float, start_at: float, end_at: float, max_steps: int) -> bool:
        """Open the measuring window at ``start_at``; close it at ``end_at`` or after ``max_steps``
        steps inside it. Returns True once it has closed (the load loop then stops)."""
        if not self.measuring and not self.stopping and now >= start_at:
            self.measuring = True
            self._stop_count = self.count + max_steps
            self.on_edge("start")
        if self.measuring and (now >= end_at or self.count >= self._stop_count):
            self.measuring = False
            self.stopping = True
            self.on_edge("end")
            return True
        return False

    def error(self, what: str) -> None:
        self.errors += 1
        if len(self.samples) < MAX_ERROR_SAMPLES:
            self.samples.append(what[:300])

    # -- WebSocket ----------------------------------------------------------------------------------

    def run_ws(self, conns: list[WsState], *, warmup_s: float, window_s: float, max_steps: int,
               paced_s: float | None = None, tick: Callable[[], None] | None = None,
               steps_per_reply: int = 1) -> None:
        """Step every connection: closed loop (``paced_s=None``: the next step as soon as the reply
        arrives) or paced (the next step ``paced_s`` after the reply, first steps spread over one
        interval). Calls ``on_edge("start")``/``on_edge("end")`` at the window's edges and ``tick()``
        about once a second.

        ``steps_per_reply > 1``: each frame is a ``step_batch`` of that many actions; a reply counts
        as that many steps and must be an ``observations`` frame without an error element."""
        ep = select.epoll()
        by_fd = {}
        for st in conns:
            st.sock.setblocking(False)
            ep.register(st.fd, select.EPOLLIN)
            by_fd[st.fd] = st
        due: collections.deque[tuple[float, WsState]] = collections.deque()
        now = perf_counter()
        if paced_s is None:
            for st in conns:
                self._ws_send(st, now)
        else:
            for offset, st in sorted(((random.random() * paced_s, st) for st in conns), key=lambda x: x[0]):
                due.append((now + offset, st))
        start_at = now + warmup_s
        end_at = start_at + window_s
        next_tick = now + 1.0
        lat = self.latencies
        poll = ep.poll
        batched = steps_per_reply > 1
        prefix = BATCH_PREFIX if batched else OBS_PREFIX
        try:
            while True:
                now = perf_counter()
                if self._advance_window(now, start_at, end_at, max_steps):
                    break
                if tick is not None and now >= next_tick:
                    next_tick = now + 1.0
                    tick()
                while due and due[0][0] <= now:
                    st = due.popleft()[1]
                    if st.alive:
                        self._ws_send(st, now)
                edge = start_at if not self.measuring else end_at
                if due:
                    edge = min(edge, due[0][0])
                timeout = min(max(0.0, edge - now), 0.05)
                for fd, _ev in poll(timeout):
                    st = by_fd[fd]
                    try:
                        data = st.sock.recv(262144)
                    except BlockingIOError:
                        continue
                    except OSError as exc:
                        self._ws_lost(ep, st, f"recv: {exc}")
                        continue
                    if not data:
                        self._ws_lost(ep, st, "connection closed by the server")
                        continue
                    buf = st.buf + data if st.buf else data
                    pos = 0
                    while True:
                        parsed = parse_frame(buf, pos)
                        if parsed is None:
                            break
                        pos, b0, payload = parsed
                        if b0 != 0x81:  # not a final, uncompressed text frame: the general path
                            payload = ws_message(st, b0, payload)  # type: ignore[assignment]
                            if payload is None:
                                if st.closed:
                                    self._ws_lost(ep, st, "close frame from the server")
                                    break
                                continue
                        t = perf_counter()
                        self.count += steps_per_reply
                        self.inflight -= 1
                        st.replies += 1
                        if self.measuring and len(lat) < MAX_LATENCY_SAMPLES:
                            lat.append(t - st.sent_at)
                        if batched:
                            if not payload.startswith(prefix) or BATCH_ERROR in payload:
                                self.error(f"batch reply: {payload[:200]!r}")
                        elif not payload.startswith(prefix) and not is_observation(payload):
                            self.error(f"step reply: {payload[:200]!r}")
                        if paced_s is not None:
                            due.append((t + paced_s, st))
                        else:
                            self._ws_send(st, t)
                    st.buf = buf[pos:] if pos < len(buf) else b""
            self._ws_drain(ep, by_fd, conns, steps_per_reply=steps_per_reply)
        finally:
            ep.close()

    def _send(self, conn: WsState | HttpConn, payload: bytes, now: float) -> None:
        """Send one request on a WebSocket or HTTP connection, counting it in flight."""
        conn.sent_at = now
        self.inflight += 1
        try:
            conn.sock.send(payload)
        except OSError as exc:
            self.inflight -= 1
            conn.alive = False
            self.error(f"send: {exc}")

    def _ws_send(self, st: WsState, now: float) -> None:
        self._send(st, st.frame, now)

    def _ws_lost(self, ep: Any, st: WsState, why: str) -> None:
        if not st.alive:
            return
        st.alive = False
        try:
            ep.unregister(st.fd)
        except (OSError, ValueError):
            pass
        if not self.stopping:
            self.error(why)

    def _ws_drain(self, ep: Any, by_fd: dict[int, WsState], conns: list[WsState], timeout_s: float = 5.0,
                  steps_per_reply: int = 1) -> None:
        """After the window: collect in-flight replies (bounded), without sending new steps."""
        deadline = perf_counter() + timeout_s
        while self.inflight > 0 and perf_counter() < deadline:
            for fd, _ev in ep.poll(0.05):
                st = by_fd[fd]
                try:
                    data = st.sock.recv(262144)
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if not data:
                    self._ws_lost(ep, st, "closed while draining")
                    continue
                buf = st.buf + data
                pos = 0
                while (parsed := parse_frame(buf, pos)) is not None:
                    pos, b0, payload = parsed
                    if ws_message(st, b0, payload) is not None:
                        self.inflight -= 1
                        self.count += steps_per_reply
                        st.replies += 1
                st.buf = buf[pos:]

    # -- HTTP -----------------------------------------------------------------------------------------

    def run_http(self, conns: list[HttpConn], *, warmup_s: float, window_s: float, max_steps: int) -> None:
        """Closed-loop HTTP steps: the next request as soon as the response is complete."""
        ep = select.epoll()
        by_fd = {}
        for c in conns:
            c.sock.setblocking(False)
            ep.register(c.fd, select.EPOLLIN)
            by_fd[c.fd] = c
        now = perf_counter()
        for c in conns:
            self._http_send(c, now)
        start_at = now + warmup_s
        end_at = start_at + window_s
        lat = self.latencies
        try:
            while True:
                now = perf_counter()
                if self._advance_window(now, start_at, end_at, max_steps):
                    break
                timeout = min(max(0.0, (start_at if not self.measuring else end_at) - now), 0.05)
                for fd, _ev in ep.poll(timeout):
                    c = by_fd[fd]
                    self._http_read(ep, c, lat)
            deadline = perf_counter() + 5.0
            while self.inflight > 0 and perf_counter() < deadline:
                for fd, _ev in ep.poll(0.05):
                    self._http_read(ep, by_fd[fd], lat)
        finally:
            ep.close()

    def _http_send(self, c: HttpConn, now: float) -> None:
        self._send(c, c.request, now)

    def _http_read(self, ep: Any, c: HttpConn, lat: list[float]) -> None:
        try:
            data = c.sock.recv(262144)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            if c.alive:
                c.alive = False
                ep.unregister(c.fd)
                if not self.stopping:
                    self.error("connection closed by the server")
            return
        buf = c.buf + data if c.buf else data
        while True:
            try:
                parsed = parse_response(buf)
            except ConnectionError as exc:
                self.error(str(exc))
                c.alive = False
                ep.unregister(c.fd)
                return
            if parsed is None:
                break
            end, status, _head, body = parsed
            buf = buf[end:]
            t = perf_counter()
            self.count += 1
            self.inflight -= 1
            c.replies += 1
            if self.measuring and len(lat) < MAX_LATENCY_SAMPLES:
                lat.append(t - c.sent_at)
            if status != 200:
                self.error(f"step: HTTP {status} {body[:200]!r}")
            if not self.stopping:
                self._http_send(c, t)
        c.buf = buf


def close_ws(conns: list[WsState], close_message: bytes, timeout_s: float = 3.0) -> int:
    """Say goodbye (app-level close message + close frame), wait (bounded) for the server to drop
    each connection, then close our ends. Returns how many did not finish in time."""
    ep = select.epoll()
    open_ = {}
    for st in conns:
        if not st.alive:
            st.sock.close()
            continue
        try:
            st.sock.setblocking(False)
            st.sock.send(encode_frame(close_message, 0x1, st.key) +
                         encode_frame(CLOSE_CODE_NORMAL, 0x8, st.key))
            st.closed = True
            ep.register(st.fd, select.EPOLLIN)
            open_[st.fd] = st
        except OSError:
            st.sock.close()
    deadline = perf_counter() + timeout_s
    while open_ and perf_counter() < deadline:
        for fd, _ev in ep.poll(0.05):
            st = open_[fd]
            try:
                data = st.sock.recv(262144)
            except BlockingIOError:
                continue
            except OSError:
                data = b""
            if not data:
                ep.unregister(fd)
                st.sock.close()
                del open_[fd]
    late = len(open_)
    for st in open_.values():
        st.sock.close()
    ep.close()
    return late
