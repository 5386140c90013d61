"""The server side: ``/lines``, a WebSocket where every message is one frame and gets one reply.

Frames (JSON objects): ``{"type": "reset", "data": {...reset args}}``, ``{"type": "step",
"data": {...action}}``, ``{"type": "state"}``, ``{"type": "close"}``. Replies:
``{"type": "observation", "data": ...}``, ``{"type": "state", "data": ...}``, or
``{"type": "error", "data": {"code", "message", ...}}``. Every session rule (capacity, validation,
mode, step kwargs, timeouts) belongs to the kernel's session manager: this module only
translates frames into its calls, so a bad frame costs the caller an error reply, never the
connection or the server.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any

from starlette.datastructures import Headers
from starlette.routing import BaseRoute, WebSocketRoute

from openenv.context import ServerContext
from openenv.errors import OpenEnvError
from openenv.frameloop import Close, FrameLoop, close, send_text
from openenv.interfaces import ServerTransport
from openenv.types import components_wanted

__all__ = ["LinesTransport"]

PATH = "/lines"


def _error(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"type": "error", "data": {"code": code, "message": message, **extra}}


class _Endpoint:
    """Mounts the transport as a raw ASGI app (Starlette would wrap a function or method in its
    ``WebSocket`` object; the kernel's frame loop speaks plain ASGI)."""

    def __init__(self, transport: LinesTransport) -> None:
        self.transport = transport

    async def __call__(self, scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        await self.transport.endpoint(scope, receive, send)


class LinesTransport(ServerTransport):
    """Serves ``/lines``; one session per connection, closed when the connection ends.

    The kernel's ``FrameLoop`` runs the connection: the first-frame timeout, the message size
    limit, the server's body budget, noticing a client that vanishes mid-call, and a release that
    survives shutdown all come with it. This class only turns one frame into one reply.
    """

    name = "lines"

    def routes(self) -> list[BaseRoute]:
        return [WebSocketRoute(PATH, _Endpoint(self))]

    def __init__(self, ctx: ServerContext) -> None:
        super().__init__(ctx)
        self._frames = FrameLoop(
            ctx, first_frame_timeout_s=60.0, label=PATH,
            binary_reply=json.dumps(_error("INVALID_JSON", "Binary frames are not supported: send JSON text.")),
            busy_reply=lambda detail: json.dumps(_error("CAPACITY_REACHED", detail)))

    async def shutdown(self) -> None:
        await self._frames.drain()

    async def endpoint(self, scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        if scope["type"] != "websocket" or (await receive())["type"] != "websocket.connect":
            return
        await send({"type": "websocket.accept"})
        sessions = self.ctx.sessions
        try:
            session = await sessions.open(owner=self.ctx.principal(Headers(scope=scope)), transport="lines",
                                          attach=True)
        except OpenEnvError as exc:  # capacity, a failing env factory: say so, then hang up
            if await send_text(send, json.dumps({"type": "error", "data": exc.to_wire()})):
                await close(send, 1000)
            return
        ending = None
        try:
            wanted = components_wanted(scope.get("headers", ()))  # a rubric's components (protocol §2.7)
            ending = await self._frames.run(scope, receive, send, partial(self.dispatch, session, wanted),
                                            session_id=session.id, activity=partial(sessions.touch, session))
        finally:
            await self._frames.release(sessions.detach(session, close=True, reason="connection closed"))
        await FrameLoop.close(send, ending)

    async def dispatch(self, session: Any, components: bool, text: str) -> str | Close:
        """One frame in, one encoded reply out (``Close`` ends the connection after its reply)."""
        reply, goodbye = await self.handle(session, text, components)
        return Close(json.dumps(reply)) if goodbye else json.dumps(reply)

    async def handle(self, session: Any, text: str, components: bool = False) -> tuple[dict[str, Any], bool]:
        """The reply to one frame, and whether the connection should end after it."""
        try:
            frame = json.loads(text)
        except ValueError as exc:
            return _error("INVALID_JSON", f"Frame is not JSON ({exc}): send one JSON object per message."), False
        if not isinstance(frame, dict) or not isinstance(frame.get("type"), str):
            return _error("VALIDATION_ERROR", 'A frame is a JSON object with a "type" (reset, step, state, '
                          "close)."), False
        kind, data = frame["type"], frame.get("data")
        sessions = self.ctx.sessions
        try:
            if kind == "reset":
                outcome = await sessions.reset_outcome(session, data if isinstance(data, dict) else {})
                return {"type": "observation", "data": outcome.payload(components)}, False
            if kind == "step":
                outcome = await sessions.step_outcome(session, data, frame.get("kwargs"))
                return {"type": "observation", "data": outcome.payload(components)}, False
            if kind == "state":
                return {"type": "state", "data": await sessions.state(session)}, False
            if kind == "close":
                return {"type": "closed", "data": {}}, True
        except OpenEnvError as exc:  # the manager's typed errors carry their wire form
            return {"type": "error", "data": exc.to_wire()}, False
        return _error("UNKNOWN_TYPE", f"Unknown frame type {kind!r}: use reset, step, state or close."), False
