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
from typing import Any

from starlette.routing import BaseRoute, WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect

from openenv.errors import OpenEnvError
from openenv.interfaces import ServerTransport
from openenv.types import observation_payload

__all__ = ["LinesTransport"]

PATH = "/lines"


def _error(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"type": "error", "data": {"code": code, "message": message, **extra}}


class LinesTransport(ServerTransport):
    """Serves ``/lines``; one session per connection, closed when the connection ends."""

    name = "lines"

    def routes(self) -> list[BaseRoute]:
        return [WebSocketRoute(PATH, self.endpoint)]

    async def endpoint(self, websocket: WebSocket) -> None:
        await websocket.accept()
        sessions = self.ctx.sessions
        try:
            session = await _open(sessions, owner=self.ctx.principal(websocket.headers))
        except OpenEnvError as exc:  # capacity, a failing env factory: say so, then hang up
            await websocket.send_text(json.dumps({"type": "error", "data": exc.to_wire()}))
            await websocket.close(1000)
            return
        try:
            while True:
                text = await websocket.receive_text()
                reply, goodbye = await self.handle(session, text)
                await websocket.send_text(json.dumps(reply))
                if goodbye:
                    await websocket.close(1000)
                    return
        except WebSocketDisconnect:
            return
        finally:
            await _release(sessions, session)

    async def handle(self, session: Any, text: str) -> tuple[dict[str, Any], bool]:
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
                obs = await sessions.reset(session, data if isinstance(data, dict) else {})
                return {"type": "observation", "data": observation_payload(obs)}, False
            if kind == "step":
                obs = await sessions.step(session, data, frame.get("kwargs"))
                return {"type": "observation", "data": observation_payload(obs)}, False
            if kind == "state":
                return {"type": "state", "data": await sessions.state(session)}, False
            if kind == "close":
                return {"type": "closed", "data": {}}, True
        except OpenEnvError as exc:  # the manager's typed errors carry their wire form
            return {"type": "error", "data": exc.to_wire()}, False
        return _error("UNKNOWN_TYPE", f"Unknown frame type {kind!r}: use reset, step, state or close."), False


async def _open(sessions: Any, *, owner: str | None) -> Any:
    return await sessions.open(owner=owner, transport="lines", attach=True)


async def _release(sessions: Any, session: Any) -> None:
    await sessions.detach(session, close=True, reason="connection closed")
