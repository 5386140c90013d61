"""The ``harness`` transport: upstream's ``/harness`` WebSocket channel (RFC 005, docs/protocol.md §6.3).

Served in production mode for envs that are ``HarnessEnvironment`` s; anything else is refused
with one error frame (``MODE_ERROR`` / ``NOT_A_HARNESS_ENV``) and close 1000.

1. The connection opens a session exactly as ``/ws`` does (same capacity, same token auth), then
   resets it (the harness starts with the env's tools) and sends
   ``{"type": "session_started", "data": {"session_id", "harness"}}``. Capacity and factory
   failures: ``{"type": "error", "data": {"message", "code": "CAPACITY_REACHED" | "FACTORY_ERROR"}}``;
   a failed reset: ``{"type": "error", "data": {"message": "harness session failed", "code":
   "SESSION_ERROR"}}``; then close.
2. Each ``{"type": "message", "content": str}`` is one turn, run as a ``step`` through the session
   manager (its step deadline applies); its events are streamed as ``{"type", "timestamp", "data"}``
   frames as they happen, ending with ``turn_complete``. Bad JSON or a bad shape gets a
   ``protocol_error`` frame (``INVALID_JSON`` / ``VALIDATION_ERROR``) and the connection goes on.
3. A turn that ends the episode (dead harness, turn timeout, no ``TURN_COMPLETE``) or fails gets
   ``{"type": "error", "timestamp", "data": {"message", "recoverable": false}}`` and close 1000.

Frames go through the kernel's ``FrameLoop``: first-frame timeout, ``max_message_bytes``, the
body budget and the noticing of vanished clients are the same as on ``/ws``. However the
connection ends, its session is closed, and with it the harness process and its tool bridge.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from functools import partial
from typing import Any, ClassVar

from pydantic import Field
from pydantic import ValidationError as PydanticValidationError
from starlette.datastructures import Headers
from starlette.routing import BaseRoute, WebSocketRoute

from openenv.context import ServerContext, TransportOptions
from openenv.errors import OpenEnvError
from openenv.frameloop import Close, Ending, FrameLoop, close, send_text
from openenv.interfaces import ServerTransport
from openenv.limits import loads
from openenv.modes import Mode
from openenv.sessions import Session
from openenv.wire import dumps

from .environment import HarnessEnvironment
from .events import HarnessClientMessage, HarnessEvent

__all__ = ["HarnessChannel", "HarnessChannelOptions"]

log = logging.getLogger("openenv_gateway.agentic")

TURN_FAILED = "harness turn failed"
SESSION_FAILED = "harness session failed"


class HarnessChannelOptions(TransportOptions):
    """Options of the ``harness`` transport (``transport_options={"harness": {...}}``)."""

    #: Seconds after ``session_started`` within which the client must send its first message.
    first_frame_timeout_s: float | None = Field(default=60.0, gt=0)


def _protocol_error(message: str, code: str, **extra: Any) -> str:
    return dumps({"type": "protocol_error", "data": {"message": message, "code": code, **extra}})


def _terminal(message: str) -> str:
    return dumps({"type": "error", "timestamp": time.time(), "data": {"message": message, "recoverable": False}})


def _refusal(message: str, code: str) -> str:
    return dumps({"type": "error", "data": {"message": message, "code": code}})


class HarnessChannel(ServerTransport):
    """Serves ``/harness`` (see the module docstring)."""

    name = "harness"
    options_type: ClassVar[type[TransportOptions]] = HarnessChannelOptions

    def __init__(self, ctx: ServerContext) -> None:
        super().__init__(ctx)
        options: HarnessChannelOptions = ctx.options_for(self)
        self._frames = FrameLoop(
            ctx, first_frame_timeout_s=options.first_frame_timeout_s, label="/harness",
            binary_reply=_protocol_error("Invalid JSON: binary frames are not supported, send text frames",
                                         "INVALID_JSON"),
            busy_reply=lambda detail: _protocol_error(detail, "CAPACITY_REACHED"))

    def routes(self) -> list[BaseRoute]:
        return [WebSocketRoute("/harness", self)]

    def capabilities(self) -> dict[str, Any]:
        return {"served": self._refusal() is None}

    async def shutdown(self) -> None:
        await self._frames.drain()

    def _refusal(self) -> str | None:
        """Why this server does not serve ``/harness`` (an error frame), or ``None``."""
        if self.ctx.mode is not Mode.PRODUCTION:
            return _refusal(f"/harness is served in production mode only; this server runs in {self.ctx.mode.value} "
                            "mode: drive the env over /ws with step actions {\"message\": ...} instead, or serve it "
                            "with --mode production", "MODE_ERROR")
        if "step" in self.ctx.sessions.policy.refused(one_shot=False):
            return _refusal("/harness runs each turn as a step, which this server refuses (strict_production): "
                            "serve it without strict production", "MODE_ERROR")
        cls = self.ctx.env_class
        if cls is not None and not (isinstance(cls, type) and issubclass(cls, HarnessEnvironment)):
            return self._not_harness()
        return None

    def _not_harness(self) -> str:
        return _refusal(f"/harness serves HarnessEnvironment envs only; {self.ctx.env_name} is not one: use /ws",
                        "NOT_A_HARNESS_ENV")

    async def __call__(self, scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        if scope["type"] != "websocket" or (await receive())["type"] != "websocket.connect":
            return
        try:
            await send({"type": "websocket.accept"})  # accepted first, so refusals arrive as frames
        except (OSError, RuntimeError):
            return
        refusal = self._refusal()
        if refusal is not None:
            if await send_text(send, refusal):
                await close(send, 1000)
            return
        sessions = self.ctx.sessions
        try:
            session = await sessions.open(owner=self.ctx.principal(Headers(scope=scope)), transport="harness",
                                          attach=True)
        except Exception as exc:
            message, code = (exc.message, exc.code) if isinstance(exc, OpenEnvError) else (str(exc), "SESSION_ERROR")
            if await send_text(send, _refusal(message, code)):  # upstream sends no count fields here
                await close(send, 1000)
            return
        env = session.env
        ending: Ending = None
        try:
            ending = await self._serve(scope, receive, send, session, env)
        finally:
            if isinstance(env, HarnessEnvironment):
                env.event_listener = None
            reason = "disconnected" if ending is None else "closed" if ending[0] == 1000 else ending[1]
            await self._frames.release(sessions.detach(session, close=True, reason=reason))
        await FrameLoop.close(send, ending)

    async def _serve(self, scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any],
                     session: Session, env: Any) -> Ending:
        """Start the episode, then run the frame loop; the close to send (``None``: client gone)."""
        if not isinstance(env, HarnessEnvironment):  # a factory that did not say what it builds
            return (1000, "") if await send_text(send, self._not_harness()) else None
        try:
            await self.ctx.sessions.reset(session)
        except Exception as exc:
            log.warning("/harness session %s: reset failed: %s", session.id, exc)
            return (1000, "") if await send_text(send, _refusal(SESSION_FAILED, "SESSION_ERROR")) else None
        started = {"type": "session_started", "data": {"session_id": session.id, "harness": env.adapter.config.name}}
        if not await send_text(send, dumps(started)):
            return None
        return await self._frames.run(scope, receive, send, partial(self._dispatch, session, env, send),
                                      session_id=session.id, activity=partial(self.ctx.sessions.touch, session))

    async def _dispatch(self, session: Session, env: HarnessEnvironment, send: Callable[..., Any],
                        text: str) -> str | Close | None:
        try:
            frame = loads(text)
        except ValueError as exc:
            return _protocol_error(f"Invalid JSON: {exc}", "INVALID_JSON")
        try:
            message = HarnessClientMessage.model_validate(frame)
        except PydanticValidationError as exc:
            errors = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
            return _protocol_error("Invalid message", "VALIDATION_ERROR", errors=errors)
        return await self._turn(session, env, send, message.content)

    async def _turn(self, session: Session, env: HarnessEnvironment, send: Callable[..., Any],
                    content: str) -> str | Close | None:
        """One turn: events streamed as they come, then nothing more (the last was ``turn_complete``)
        or the terminal error and close."""
        events: asyncio.Queue[HarnessEvent] = asyncio.Queue()
        env.event_listener = events.put_nowait
        step = asyncio.ensure_future(self.ctx.sessions.step(session, {"message": content}))
        gone = False
        try:
            while not step.done() or not events.empty():
                if events.empty():
                    waiter = asyncio.ensure_future(events.get())
                    await asyncio.wait({step, waiter}, return_when=asyncio.FIRST_COMPLETED)
                    if not waiter.done():
                        waiter.cancel()
                        continue
                    event = waiter.result()
                else:
                    event = events.get_nowait()
                if not gone and not await send_text(send, dumps(event.model_dump(mode="json"))):
                    gone = True  # keep draining; the frame loop notices the disconnect
            observation = step.result()
        except asyncio.CancelledError:
            step.cancel()
            raise
        except Exception as exc:
            log.warning("/harness session %s: turn failed: %s", session.id, exc)
            return Close(_terminal(TURN_FAILED))
        finally:
            env.event_listener = None
        if gone:
            return None
        if observation.done and "error" in observation.metadata:
            return Close(_terminal(str(observation.metadata["error"])))
        return None
