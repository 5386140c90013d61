"""WebSocket messages under the server-wide body budget from their first byte.

``openenv.guard`` bounds HTTP bodies as they are read. A WebSocket message is read by uvicorn's
protocol before the app sees it: partial frames being assembled and a complete message waiting in
its queue, up to ``max_message_bytes`` per connection, and many connections sending large frames
at once could hold all of that. ``guarded_ws_protocol`` wraps uvicorn's WebSocket protocol so the
bytes count against the same ``BodyBudget``:

* Every byte a connection receives is added to the budget. A message's bytes stay held while the
  app handles it — until the app asks for the next message (the transports reply to a frame
  before they read the next) or the connection ends.
* While the budget is spent, a connection that receives more and is in the middle of a large
  message (``BUDGETED_MESSAGE_BYTES`` or more unhandled) is paused (TCP back-pressure: the client's
  writes wait, nothing is dropped). Connections sending ordinary small frames are never paused.
  One connection at a time, the *runner*, keeps reading so that some message always completes and
  frees its bytes; paused connections resume, oldest first, as bytes are given back. A runner
  that sends nothing for ``RUNNER_TURN_S`` in the middle of its message while others wait is
  paused in turn and the next one runs (a stalled client cannot hold the others up). Pausing is logged
  at most once a second.
* ``send`` returns once the reply has drained to the socket, so a message's hold lasts until its
  reply has really left the process.
* The scope carries the extension ``openenv.wsguard.BUDGETED``: the transports, which otherwise
  hold a large message against the budget themselves (an app served some other way), then leave it
  to this layer (``openenv.wsguard.transport_hold_min``).

The budget counts message bytes; handling a message costs a multiple of that (decoded text, the
parsed value, the reply: ~10x for an echo of one large string). Only uvicorn's
``websockets-sansio`` protocol (what ``ws="auto"`` picks when ``websockets`` is installed) is
wrapped; with another, the server runs it unwrapped and says so in its log.
"""

from __future__ import annotations

import collections
import logging
import time
from typing import Any

from openenv.limits import BUDGETED_MESSAGE_BYTES, BodyBudget
from openenv.wsguard import BUDGETED

__all__ = ["RUNNER_TURN_S", "guarded_ws_protocol"]

log = logging.getLogger("openenv.server")

#: Seconds a runner may go without receiving a byte of its message before the next one runs.
RUNNER_TURN_S = 1.0


class _ReadGate:
    """The connections paused for the budget, and the one allowed to read past it."""

    def __init__(self, budget: BodyBudget) -> None:
        self.budget = budget
        self.runner: Any = None
        self.waiting: collections.deque[Any] = collections.deque()
        self.paused_total = 0
        self._last_log = 0.0
        self._turn: Any = None

    def after_read(self, proto: Any) -> None:
        budget = self.budget
        if budget.used <= budget.limit or proto is self.runner or proto._oe_throttled:
            return
        if proto._oe_held - proto._oe_handed < BUDGETED_MESSAGE_BYTES or proto.transport.is_closing():
            return  # small frames always flow
        if self.runner is None:
            self._run(proto)  # keeps reading: its message completes and frees its bytes
            return
        self._pause(proto)

    def _pause(self, proto: Any) -> None:
        proto._oe_throttled = True
        proto.transport.pause_reading()
        self.waiting.append(proto)
        self.paused_total += 1
        now = time.monotonic()
        if now - self._last_log >= 1.0:
            self._last_log = now
            log.warning("paused reading a WebSocket connection: %d bytes of large requests and messages "
                        "held, the limit is %d (max_body_budget_bytes); %d paused so far",
                        self.budget.used, self.budget.limit, self.paused_total)

    def _run(self, proto: Any) -> None:
        self.runner = proto
        self._arm(proto)

    def _arm(self, proto: Any) -> None:
        if self._turn is not None:
            self._turn.cancel()
        proto._oe_turn_mark = proto._oe_held
        self._turn = proto.loop.call_later(RUNNER_TURN_S, self._next_turn, proto)

    def _next_turn(self, proto: Any) -> None:
        self._turn = None
        if self.runner is not proto:
            return
        if not self.waiting or self.budget.used <= self.budget.limit:
            self.runner = None
            self._wake()
            return
        if proto._oe_held > proto._oe_turn_mark or proto.read_paused or proto.transport.is_closing():
            # Still reading, or its message is complete and with the app: the turn goes on.
            self._arm(proto)
            return
        # A whole turn without a byte: a trickling (or stalled) client; the next one runs.
        self.runner = None
        self._pause(proto)  # to the back of the line
        self._wake()

    def given_back(self, proto: Any) -> None:
        """``proto`` gave bytes back (already subtracted): end its turn, let paused ones read."""
        if self.runner is proto:
            self.runner = None
            if self._turn is not None:
                self._turn.cancel()
                self._turn = None
        self._wake()

    def forget(self, proto: Any) -> None:
        proto._oe_throttled = False
        try:
            self.waiting.remove(proto)
        except ValueError:
            pass
        proto._oe_handed = 0
        self.budget.give(proto._oe_held)
        proto._oe_held = 0
        self.given_back(proto)

    def _wake(self) -> None:
        budget = self.budget
        while self.waiting and (budget.used <= budget.limit or self.runner is None):
            proto = self.waiting.popleft()
            proto._oe_throttled = False
            if budget.used > budget.limit:
                self._run(proto)
            if not proto.read_paused and not proto.transport.is_closing():
                proto.transport.resume_reading()


def guarded_ws_protocol(base: type[Any], budget: BodyBudget) -> type[Any]:
    """A subclass of uvicorn's ``WebSocketsSansIOProtocol`` ``base`` counting what it reads
    against ``budget`` (see the module docs)."""
    gate = _ReadGate(budget)

    # Every frame passes here, so the common case (budget not spent, nobody paused) is kept to a
    # few attribute updates: no super() objects, no extra coroutines.
    base_data_received = base.data_received
    base_send = base.send
    waiting = gate.waiting

    class GuardedWebSocketProtocol(base):  # type: ignore[misc, valid-type]
        openenv_read_gate = gate

        def connection_made(self, transport: Any) -> None:
            self._oe_held = 0  # bytes read and not yet given back: the message being handled, the next
            self._oe_handed = 0  # of those, the bytes of messages the app has taken
            self._oe_throttled = False
            self._oe_turn_mark = 0
            super().connection_made(transport)

        def handle_connect(self, event: Any) -> None:
            super().handle_connect(event)
            self.scope["extensions"] = {**(self.scope.get("extensions") or {}), BUDGETED: {}}

        def data_received(self, data: bytes) -> None:
            n = len(data)
            self._oe_held += n
            budget.used += n
            base_data_received(self, data)
            if budget.used > budget.limit:
                gate.after_read(self)

        async def receive(self) -> Any:
            # Asking for the next message: the one handed over before is handled.
            handed = self._oe_handed
            if handed:
                self._oe_handed = 0
                self._oe_held -= handed
                budget.used -= handed
                if waiting or gate.runner is self:
                    gate.given_back(self)
            # uvicorn's own receive, except that a connection paused for the budget stays paused.
            message = await self.queue.get()
            self._oe_handed = self._oe_held
            if self.read_paused and self.queue.empty():  # type: ignore[has-type]
                self.read_paused = False
                if not self._oe_throttled:
                    self.transport.resume_reading()
            return message

        def send(self, message: Any) -> Any:
            if message["type"] != "websocket.send":
                return base_send(self, message)
            return self._oe_send_drained(message)

        async def _oe_send_drained(self, message: Any) -> None:
            await base_send(self, message)
            if not self.writable.is_set():
                await self.writable.wait()  # drained (or the connection is gone)

        def connection_lost(self, exc: Exception | None) -> None:
            gate.forget(self)
            super().connection_lost(exc)

    GuardedWebSocketProtocol.__name__ = f"Guarded{base.__name__}"
    return GuardedWebSocketProtocol
