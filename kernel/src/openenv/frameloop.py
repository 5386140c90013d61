"""The one WebSocket frame loop every WebSocket transport runs (``/ws``, WebSocket ``/mcp``, yours).

A transport hands over only "dispatch this text, give me the reply"; the loop owns the rules that
protect the server, so a third-party transport gets them without writing them:

* **First frame.** A new connection holds a session slot; one that sends nothing within
  ``first_frame_timeout_s`` is closed with ``1008`` and a reason naming the limit.
* **Size.** A message over ``max_message_bytes`` closes the connection with ``1009`` and a reason
  naming the limit (counted in UTF-8 bytes; only texts that could exceed it pay for the count).
* **Body budget.** A text frame of ``transport_hold_min`` characters and up is held against the
  server's ``BodyBudget`` until its reply is sent (given back whatever happens); past the budget it
  is answered with the transport's ``busy`` reply and the connection is kept. When the serving
  layer already counts every WebSocket byte (the scope's ``openenv.budgeted`` extension) the loop
  leaves that to it.
* **A client that vanishes mid-call is noticed.** While a dispatch is pending (an env call on a
  thread or in a worker process, possibly hung), the loop reads the next event; a disconnect
  cancels the dispatch at once, so the transport's ``finally`` releases the session and the session
  manager's ``close`` abandons the hung call within ``close_grace_s`` (docs/security.md). At most
  one frame is read ahead (a frame sent behind a pending one waits its turn, replies stay in order);
  a client that pipelines more behind a hung call is noticed when that call ends or times out.
  One ticker per transport (every ``WATCH_AFTER_S`` while connections run) finds dispatches
  pending that long; a usual step pays two attribute writes for this, never a task.
* **Release survives shutdown.** ``release`` runs the transport's session release shielded, so
  a handler cancelled at server shutdown still closes its sessions; ``drain`` waits for those.

Use::

    loop = FrameLoop(ctx, first_frame_timeout_s=60.0, label="/lines", binary_reply=..., busy_reply=...)
    ending = await loop.run(scope, receive, send, dispatch)   # dispatch(text) -> str | None | Close
    ...
    await loop.release(ctx.sessions.detach(session, close=True))
    await loop.close(send, ending)
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from openenv.limits import BUDGETED_MESSAGE_BYTES
from openenv.wsguard import transport_hold_min

if TYPE_CHECKING:
    from openenv.context import ServerContext

__all__ = ["Close", "Dispatch", "Ending", "FrameLoop", "Frames", "close", "send_text", "too_big"]

log = logging.getLogger("openenv.server")

#: The ticker's period: a dispatch pending for one to two periods gets a read-ahead, to notice a
#: client that vanished mid-call; far below the close grace (5 s), far above a usual step.
WATCH_AFTER_S = 0.05

#: How a connection ends: the close ``(code, reason)`` to send, or None when the client is gone.
Ending = tuple[int, str] | None


@dataclass(frozen=True, slots=True)
class Close:
    """A dispatch result that ends the connection: ``reply`` (if any) is sent, then close ``code``."""

    reply: str | None = None
    code: int = 1000
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Frames:
    """A dispatch result of several frames: the text frame ``reply``, then each of ``binary`` as a
    binary frame (the ``binary_images`` extension, docs/protocol.md §12)."""

    reply: str
    binary: tuple[bytes, ...] = ()


#: The transport's half: one inbound text frame -> its encoded reply, ``Frames`` (a reply followed
#: by binary frames), ``None`` (no reply, e.g. to a JSON-RPC notification) or ``Close`` (end the
#: connection, e.g. after a ``{"type":"close"}`` frame).
Dispatch = Callable[[str], Awaitable["str | Frames | Close | None"]]


def too_big(size: int, limit: int) -> str:
    """The close reason for an oversized message (a close reason must fit in 123 bytes)."""
    return f"Message of {size} bytes exceeds the server limit max_message_bytes={limit}"


async def send_text(send: Callable[..., Any], text: str) -> bool:
    """Send one text frame; False when the client is gone (uvicorn raises an OSError subclass,
    other servers a RuntimeError)."""
    try:
        await send({"type": "websocket.send", "text": text})
    except (OSError, RuntimeError):
        return False
    return True


async def close(send: Callable[..., Any], code: int, reason: str = "") -> None:
    """Send a close frame; nothing happens when the client is already gone."""
    try:
        await send({"type": "websocket.close", "code": code, "reason": reason})
    except (OSError, RuntimeError):
        pass


class FrameLoop:
    """The frame loop of one WebSocket transport (see the module docstring); one per transport,
    reused by every connection (``run`` keeps each connection's state in its own frame)."""

    __slots__ = (
        "_ticker",
        "_watches",
        "binary_reply",
        "budget",
        "busy_reply",
        "first_frame_timeout_s",
        "label",
        "max_message_bytes",
        "releases",
    )

    def __init__(self, ctx: ServerContext, *, first_frame_timeout_s: float | None, label: str,
                 binary_reply: str | None, busy_reply: Callable[[str], str]) -> None:
        """``binary_reply``: the reply to a binary frame (None: close with 1003). ``busy_reply``:
        the reply to a frame refused for the budget, given the budget's explanation."""
        self.max_message_bytes = ctx.config.max_message_bytes
        self.budget = ctx.body_budget
        self.first_frame_timeout_s = first_frame_timeout_s
        self.label = label
        self.binary_reply = binary_reply
        self.busy_reply = busy_reply
        self._watches: set[_Watch] = set()
        self._ticker: asyncio.Task[None] | None = None
        #: Session releases still running (``release``), until ``drain``.
        self.releases: set[asyncio.Task[Any]] = set()

    async def run(self, scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]],
                  send: Callable[..., Any], dispatch: Dispatch, *, session_id: str = "?",
                  activity: Callable[[], object] | None = None) -> Ending:
        """Serve frames until the connection ends; returns the close to send (``close``) or None
        when the client is gone. ``activity`` is called for every message received (e.g. the
        session manager's ``touch``); ``session_id`` only names the connection in log lines."""
        limit = self.max_message_bytes
        # Characters <= UTF-8 bytes <= 4 * characters: only texts longer than limit/4 characters
        # can exceed the limit, and only those pay for an encode to count bytes exactly.
        maybe_big = limit // 4
        hold_min = transport_hold_min(scope, limit)
        budget = self.budget
        first = self.first_frame_timeout_s
        watch = _Watch(asyncio.current_task(), receive, budget, hold_min)
        self._watches.add(watch)
        ticker = self._ticker
        # A ticker left on another loop (an app served by one loop after another, in tests) is replaced.
        if ticker is None or ticker.done() or ticker.get_loop() is not asyncio.get_running_loop():
            self._ticker = asyncio.ensure_future(self._tick())
        try:
            while True:
                if watch.ahead is not None:  # read while the last dispatch was pending
                    event = await watch.next_ahead()
                elif first is None:
                    event = await receive()
                else:
                    try:
                        event = await asyncio.wait_for(receive(), first)
                    except TimeoutError:
                        log.warning("closed %s connection of session %s: no frame within %s s",
                                    self.label, session_id, first)
                        return 1008, f"no frame within {first} s of connecting"
                first = None
                etype = event["type"]
                if etype != "websocket.receive":
                    if etype == "websocket.disconnect":
                        return None
                    continue
                if activity is not None:
                    activity()
                text = event.get("text")
                held = 0
                try:
                    reply: str | Frames | Close | None
                    if text is None:
                        size = len(event.get("bytes") or b"")
                        if size > limit:
                            return 1009, too_big(size, limit)
                        if self.binary_reply is None:
                            return 1003, "binary frames are not supported: send text frames"
                        reply = self.binary_reply
                    else:
                        n = len(text)
                        if n > maybe_big:
                            size = len(text.encode("utf-8", "surrogatepass"))
                            if size > limit:
                                return 1009, too_big(size, limit)
                        if n >= hold_min:
                            if not budget.take(n):
                                log.warning("refused a %d-character %s frame of session %s: body budget spent",
                                            n, self.label, session_id)
                                reply = self.busy_reply(budget.busy_detail(n))
                                text = None
                            else:
                                held = n
                        if text is not None:
                            # Marked pending: the transport's ticker watches it if it is still
                            # pending one tick later (two attribute writes per frame, nothing more).
                            watch.size = n if not held else 0
                            watch.frame += 1
                            watch.pending = True
                            try:
                                reply = await dispatch(text)
                            except asyncio.CancelledError:
                                if watch.gone and watch.task is not None and not watch.task.uncancel():
                                    return None  # the client vanished mid-call (and nobody else cancelled)
                                raise
                            finally:
                                watch.pending = False
                    del text, event  # a held message is released as soon as its reply is built
                    if reply is None:  # nothing to answer (a notification)
                        continue
                    if type(reply) is Frames:
                        try:
                            await send({"type": "websocket.send", "text": reply.reply})
                            for blob in reply.binary:
                                await send({"type": "websocket.send", "bytes": blob})
                        except (OSError, RuntimeError):  # the client is gone
                            return None
                        continue
                    if type(reply) is not str:
                        assert isinstance(reply, Close)
                        if reply.reply is not None and not await send_text(send, reply.reply):
                            return None
                        return reply.code, reply.reason
                    try:
                        await send({"type": "websocket.send", "text": reply})
                    except (OSError, RuntimeError):  # the client is gone
                        return None
                finally:
                    if held:  # held from take() until the reply is sent, whatever happens
                        budget.give(held)
                    if watch.held:
                        watch.release()
        finally:
            watch.stop()
            self._watches.discard(watch)
            if not self._watches and self._ticker is not None:
                self._ticker.cancel()
                self._ticker = None

    async def _tick(self) -> None:
        """Every ``WATCH_AFTER_S`` while connections run: a dispatch still pending since the last
        tick gets its read-ahead (``_Watch.start``). Cancelled when the last connection ends."""
        while self._watches:
            await asyncio.sleep(WATCH_AFTER_S)
            for watch in list(self._watches):
                watch.tick()

    async def release(self, work: Coroutine[Any, Any, Any]) -> None:
        """Run ``work`` (a session's detach/close) to completion even if this handler is cancelled
        (server shutdown): it is shielded and kept until ``drain``."""
        task = asyncio.ensure_future(work)
        self.releases.add(task)
        task.add_done_callback(self.releases.discard)
        await asyncio.shield(task)

    async def drain(self) -> None:
        """Wait for every release still running (the transport's ``shutdown``)."""
        if self.releases:
            await asyncio.gather(*list(self.releases), return_exceptions=True)

    @staticmethod
    async def close(send: Callable[..., Any], ending: Ending) -> None:
        """Send the close ``run`` returned (nothing when the client is gone)."""
        if ending is not None:
            await close(send, *ending)


class _Watch:
    """One connection's read-ahead: a ``receive`` started while a dispatch is pending."""

    __slots__ = ("ahead", "budget", "frame", "gone", "held", "hold_min", "pending", "receive", "seen", "size",
                 "task")

    def __init__(self, task: asyncio.Task[Any] | None, receive: Callable[[], Awaitable[dict[str, Any]]],
                 budget: Any, hold_min: int) -> None:
        self.task = task
        self.frame = 0  # dispatches started on this connection
        self.seen = -1  # the dispatch pending at the ticker's last look
        self.receive = receive
        self.budget = budget
        self.hold_min = hold_min
        self.ahead: asyncio.Future[dict[str, Any]] | None = None
        self.pending = False
        self.gone = False
        self.size = 0  # the pending frame's length, when the loop itself does not hold it
        self.held = 0

    def tick(self) -> None:
        """The ticker looks: a dispatch pending at two looks in a row has been pending at least
        ``WATCH_AFTER_S`` (a usual step ends far sooner and never pays for a read-ahead task)."""
        if not self.pending:
            self.seen = -1
        elif self.seen == self.frame:
            self.start()
        else:
            self.seen = self.frame

    def start(self) -> None:
        """The dispatch is still pending: read the next event beside it (unless one was read already)."""
        if self.ahead is not None or self.task is None:
            return
        if self.size >= BUDGETED_MESSAGE_BYTES:
            # The serving layer gives a message's bytes back when the next one is asked for: the
            # frame still being dispatched stays counted here instead (already read, so never refused).
            self.budget.used += self.size
            self.held = self.size
        self.ahead = asyncio.ensure_future(self.receive())
        self.ahead.add_done_callback(self._arrived)

    def _arrived(self, ahead: asyncio.Future[dict[str, Any]]) -> None:
        if not self.pending or ahead.cancelled():
            return
        exc = ahead.exception()
        if exc is not None or ahead.result()["type"] == "websocket.disconnect":
            self.gone = True
            assert self.task is not None
            self.task.cancel()  # the dispatch is abandoned; the session's close bounds the env call

    async def next_ahead(self) -> dict[str, Any]:
        ahead = self.ahead
        assert ahead is not None
        try:
            return await ahead
        except (OSError, RuntimeError):
            return {"type": "websocket.disconnect", "code": 1006}
        finally:
            self.ahead = None

    def release(self) -> None:
        if self.held:
            self.budget.give(self.held)
            self.held = 0

    def stop(self) -> None:
        self.release()
        self.pending = False
        if self.ahead is not None and not self.ahead.done():
            self.ahead.cancel()
