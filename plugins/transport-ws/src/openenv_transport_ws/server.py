"""The OpenEnv ``/ws`` endpoint (docs/protocol.md §3), as a raw ASGI WebSocket handler.

Promises:

* **Upstream-compatible.** The upgrade is accepted first; then the connection opens an owned
  session (or attaches with ``?session_id=``). Capacity, factory and attach failures are one error
  frame followed by close 1000. Frames are ``reset``/``step``/``state``/``close``/``mcp`` with
  closed key sets; exactly one reply per inbound frame, in order; no reply to ``close``; never an
  unsolicited frame.
* **Fixed defects.** Non-object JSON and binary frames are recoverable errors (B9); a non-finite
  reward is an ``EXECUTION_ERROR`` (B6); ``state`` runs where the session manager runs env code
  (B17); every frame counts as activity and a connected session is never reaped (B10); frames over
  ``max_message_bytes`` close with 1009 and a reason naming the limit (B20).
* **Extensions, opt-in only** (docs/protocol.md §12): ``{"type":"hello","data":{"want":[...]}}`` grants
  ``step_kwargs`` (step frames may carry ``kwargs``) and ``ids`` (frames may carry ``id``, echoed
  in the reply) and ``step_batch`` (``{"type":"step_batch","data":{"actions":[...]}}`` runs the
  actions in order, stopping at the first ``done`` or error, and answers one
  ``{"type":"observations","data":[OP, ...]}`` frame whose last element is ``{"error": {...}}`` if
  an action failed; the session survives such an error exactly as after a single step). Without
  ``hello`` the keys are envelope errors and ``step_batch`` is ``UNKNOWN_TYPE``, exactly as upstream.
* **Lean per-frame path.** One ``wire.loads`` per inbound frame, one ``wire.dumps`` per reply,
  hand-written envelope checks, no thread hop here: the kernel's ``SessionManager`` decides
  where env code runs.
* **Nothing leaks.** However the connection ends (``close`` frame, disconnect, even mid-step, or
  cancellation at server shutdown) an owned session is closed (``env.close()`` on the env's own
  thread) and its slot freed; an attached session is detached.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from functools import partial
from typing import Any, ClassVar

import orjson
from pydantic import Field
from starlette.datastructures import Headers
from starlette.routing import BaseRoute, WebSocketRoute

from openenv.context import ServerContext, TransportOptions
from openenv.errors import OpenEnvError, SessionError, ValidationError
from openenv.frameloop import Close, Ending, FrameLoop, Frames, close, send_text
from openenv.images import split_images
from openenv.interfaces import ServerTransport
from openenv.limits import MAX_JSON_DEPTH, JSONTooDeepError, check_parsed
from openenv.limits import loads as bounded_loads
from openenv.protocol import (
    T_CLOSE,
    T_CLOSE_SESSION,
    T_CLOSED,
    T_ERROR,
    T_HELLO,
    T_MCP,
    T_OBSERVATION,
    T_OBSERVATIONS,
    T_OPEN,
    T_OPENED,
    T_RESET,
    T_RESTORE,
    T_SNAPSHOT,
    T_STATE,
    T_STEP,
    T_STEP_BATCH,
    T_STEP_MANY,
    T_TASKS,
)
from openenv.sessions import Session
from openenv.types import components_wanted
from openenv.wire import JSONDecodeError, dumps

from .connection import (
    ABSENT,
    Conn,
    bad_payload,
    query_session_id,
    unknown_session,
)
from .frames import (
    BINARY_FRAME_MESSAGE,
    EXTENSIONS,
    MAX_BATCH_ACTIONS,
    PROTOCOL,
    batch_errors,
    envelope_errors,
    error_frame,
    extra_forbidden,
    invalid_message,
    list_type,
    many_errors,
    missing,
    not_an_object,
    string_type,
)

__all__ = ["WebSocketOptions", "WebSocketTransport"]

log = logging.getLogger("openenv_transport_ws.server")

_fast_loads = orjson.loads
_DEPTH_SCAN_MIN = 2 * MAX_JSON_DEPTH  # shorter text cannot nest deeper than the limit
_FastDecodeError = orjson.JSONDecodeError
_CLOSE = Close()  # a valid {"type":"close"}: no reply, close 1000


_OBSERVATION_FRAMES = frozenset({T_OBSERVATION, T_OBSERVATIONS})


def _with_binary(reply: dict[str, Any]) -> str | Frames:
    """An observation frame for a ``binary_images`` connection: its images as binary frames."""
    blobs = split_images(reply)
    return Frames(dumps(reply), tuple(blobs)) if blobs else dumps(reply)


class WebSocketOptions(TransportOptions):
    """Options of the ``ws`` transport (``ServerConfig(transport_options={"ws": {...}})``)."""

    #: Most actions per ``step_batch`` frame and steps per ``step_many`` frame.
    max_batch_actions: int = Field(default=MAX_BATCH_ACTIONS, ge=1)
    #: Seconds a new connection (which holds a session slot) has to send its first frame before it
    #: is closed with 1008; ``None`` waits forever.
    first_frame_timeout_s: float | None = Field(default=60.0, gt=0)


class WebSocketTransport(ServerTransport):
    """Serves ``/ws``. Mounted by ``create_app`` when the ``ws`` transport is selected."""

    name = "ws"
    options_type: ClassVar[type[TransportOptions]] = WebSocketOptions

    def __init__(self, ctx: ServerContext) -> None:
        super().__init__(ctx)
        options: WebSocketOptions = ctx.options_for(self)
        #: The kernel's frame loop: first-frame timeout, size limit, body budget, vanished clients.
        self._frames = FrameLoop(
            ctx, first_frame_timeout_s=options.first_frame_timeout_s, label="/ws",
            binary_reply=dumps(error_frame(BINARY_FRAME_MESSAGE, "INVALID_JSON")),
            busy_reply=lambda detail: dumps(error_frame(detail, "CAPACITY_REACHED")))
        #: Most actions per ``step_batch`` / ``step_many`` frame (option ``max_batch_actions``).
        self.max_batch_actions = options.max_batch_actions

    # -- ServerTransport --------------------------------------------------------------------------

    def routes(self) -> list[BaseRoute]:
        # An object that is neither a function nor a method is mounted by Starlette as a raw ASGI
        # app: no WebSocket wrapper object on the per-frame path.
        return [WebSocketRoute("/ws", self)]

    def capabilities(self) -> dict[str, Any]:
        return {"extensions": ["hello", *EXTENSIONS], "max_batch_actions": self.max_batch_actions}

    async def shutdown(self) -> None:
        await self._frames.drain()

    @property
    def _cleanups(self) -> set[asyncio.Task[Any]]:
        """Session releases still running (the frame loop's ``releases``)."""
        return self._frames.releases

    # -- MCP ------------------------------------------------------------------------------------

    async def handle_mcp(self, session: Session, request: dict[str, Any]) -> dict[str, Any]:
        """Answer one tunnelled JSON-RPC request; the result becomes ``{"type":"mcp","data":...}``.

        Delegates to ``ctx.mcp_handler`` (set by the MCP transport). Without one this is
        upstream's answer for a non-MCP env (docs/protocol.md §4.5 kind D). Subclasses may override it.
        """
        handler = self.ctx.mcp_handler
        if handler is not None:
            response = await handler(session, request)
            # A notification has no response, but /ws owes exactly one reply per frame:
            # upstream answers notifications with ``"id": null``.
            return response if response is not None else {"jsonrpc": "2.0", "id": None, "result": None}
        rid = request.get("id")
        if isinstance(rid, bool) or not isinstance(rid, str | int | None):
            rid = None
        return {"jsonrpc": "2.0", "id": rid,
                "error": {"code": -32603, "message": "Environment does not support MCP", "data": None}}

    # -- the ASGI endpoint ------------------------------------------------------------------------

    async def __call__(self, scope: dict[str, Any], receive: Callable[..., Any],
                       send: Callable[..., Any]) -> None:
        if scope["type"] != "websocket" or (await receive())["type"] != "websocket.connect":
            return
        # Upstream accepts first, so that refusals below reach the client as a readable frame.
        try:
            await send({"type": "websocket.accept"})
        except (OSError, RuntimeError):  # the client left before the handshake completed
            return
        sessions = self.ctx.sessions
        session_id = query_session_id(scope)
        owned = not session_id
        # With token auth sessions are owned by the token's principal, as on every transport
        # (``ServerContext.principal``); without it, by no one.
        principal = self.ctx.principal(Headers(scope=scope))
        try:
            # A connected session is never reaped (B10): the connection is counted from the start.
            if owned:
                session = await sessions.open(owner=principal, transport="ws", attach=True)
            else:
                session = sessions.join(session_id, principal=principal)
        except Exception as exc:
            data = exc.to_wire() if isinstance(exc, OpenEnvError) else {
                "message": str(exc), "code": "SESSION_ERROR"}
            if await send_text(send, dumps({"type": T_ERROR, "data": data})):
                await close(send, 1000)
            return

        conn = Conn(session, principal, components_wanted(scope.get("headers", ())))
        ending: Ending = None
        try:
            # Every frame is activity (B10).
            ending = await self._frames.run(scope, receive, send, partial(self._dispatch, conn),
                                            session_id=session.id, activity=partial(sessions.touch, session))
        finally:
            reason = "disconnected" if ending is None else "closed" if ending[0] == 1000 else ending[1]
            for extra in list(conn.opened.values()):
                await self._release(extra, True, reason)
            conn.opened.clear()
            await self._release(session, owned, reason)
        await FrameLoop.close(send, ending)

    async def _dispatch(self, conn: Conn, text: str) -> str | Frames | Close:
        """One inbound text frame → its encoded reply (``Close()`` for ``close``, which gets no
        reply; ``Close(reply)`` when the connection's first session is gone: upstream's fatal row)."""
        try:
            frame = _fast_loads(text)
            if len(text) >= _DEPTH_SCAN_MIN:
                check_parsed(text, frame)
        except JSONTooDeepError as exc:  # refused before anything deep reaches validation
            return dumps(error_frame(f"Invalid JSON: {exc}", "INVALID_JSON"))
        except _FastDecodeError:
            try:
                bounded_loads(text)  # the standard library's message, as upstream sends it
            except JSONDecodeError as exc:
                return dumps(error_frame(f"Invalid JSON: {exc}", "INVALID_JSON"))
            raise  # pragma: no cover - orjson refused what json accepts
        if type(frame) is not dict:
            return dumps(not_an_object(frame))
        ftype = frame.get("type", "")
        reply: dict[str, Any]
        if ftype == T_STEP and len(frame) == 2 and type(frame.get("data")) is dict:
            # The hot path: {"type":"step","data":{...}} is valid under every negotiation, so the
            # envelope checks below have nothing to say about it.
            try:
                outcome = await self.ctx.sessions.step_outcome(conn.session, frame["data"])
                reply = {"type": T_OBSERVATION, "data": outcome.payload(conn.components)}
                if conn.binary_images:
                    return _with_binary(reply)
                return dumps(reply)
            except OpenEnvError as exc:
                if isinstance(exc, SessionError):
                    conn.fatal = True
                    return Close(dumps({"type": T_ERROR, "data": exc.to_wire()}))
                return dumps({"type": T_ERROR, "data": exc.to_wire()})
            except Exception as exc:  # env or serialisation failure (incl. non-finite reward, B6)
                return dumps(error_frame(str(exc), "EXECUTION_ERROR"))
        allowed = conn.allowed.get(ftype) if type(ftype) is str else None
        if allowed is None:
            reply = error_frame(f"Unknown message type: {ftype}", "UNKNOWN_TYPE")
        elif not (frame.keys() <= allowed) or bad_payload(frame, ftype, allowed):
            reply = invalid_message(envelope_errors(frame, ftype, allowed))
        elif ftype == T_CLOSE:
            return _CLOSE
        else:
            try:
                reply = await self._handle(conn, ftype, frame)
            except OpenEnvError as exc:
                reply = {"type": T_ERROR, "data": exc.to_wire()}
                # The session's env is gone (e.g. closed at server shutdown): upstream's fatal row.
                # Only the connection's first session takes the connection down with it.
                conn.fatal = isinstance(exc, SessionError) and \
                    frame.get("session_id", conn.session.id) == conn.session.id
            except Exception as exc:  # env or serialisation failure (incl. non-finite reward, B6)
                reply = error_frame(str(exc), "EXECUTION_ERROR")
        # hello (ours, never sent by upstream peers) may always carry an id.
        echo = "id" in frame and (conn.ids or ftype == T_HELLO)
        if echo:
            reply["id"] = frame["id"]
        blobs = split_images(reply) if conn.binary_images and reply.get("type") in _OBSERVATION_FRAMES else []
        try:
            out = dumps(reply)
        except Exception as exc:  # an env returned something JSON cannot carry (docs/protocol.md §3.6)
            fallback = error_frame(str(exc), "EXECUTION_ERROR")
            if echo:
                fallback["id"] = frame["id"]
            out, blobs = dumps(fallback), []
        if conn.fatal:
            return Close(out)
        return Frames(out, tuple(blobs)) if blobs else out

    async def _handle(self, conn: Conn, ftype: str, frame: dict[str, Any]) -> dict[str, Any]:
        """Run one valid frame against the session; raises ``OpenEnvError`` for error frames."""
        sessions = self.ctx.sessions
        session = conn.target(frame) if conn.multiplex else conn.session
        if ftype == T_STEP:
            outcome = await sessions.step_outcome(session, frame["data"], frame.get("kwargs"))
            return {"type": T_OBSERVATION, "data": outcome.payload(conn.components)}
        if ftype == T_STEP_BATCH:
            return await self._step_batch(conn, session, frame["data"])
        if ftype == T_STEP_MANY:
            return await self._step_many(conn, frame["data"])
        if ftype == T_OPEN:
            return await self._open(conn, frame.get("data") or {})
        if ftype == T_CLOSE_SESSION:
            return await self._close_session(conn, frame["data"])
        if ftype == T_RESET:
            outcome = await sessions.reset_outcome(session, frame.get("data") or {})
            return {"type": T_OBSERVATION, "data": outcome.payload(conn.components)}
        if ftype == T_STATE:
            return {"type": T_STATE, "data": await sessions.state(session)}
        if ftype == T_SNAPSHOT:  # the ``snapshot`` extension (openenv.snapshots)
            return {"type": T_SNAPSHOT, "data": await sessions.snapshot(session)}
        if ftype == T_RESTORE:
            outcome = await sessions.restore(session, frame["data"])
            return {"type": T_OBSERVATION, "data": outcome.payload(conn.components)}
        if ftype == T_MCP:
            return {"type": T_MCP, "data": await self.handle_mcp(session, frame["data"])}
        if ftype == T_TASKS:  # the Task API (openenv.task_api), granted by hello's `tasks`
            return {"type": T_TASKS, "data": self.ctx.task_service.query(frame["data"])}  # type: ignore[union-attr]
        return self._hello(conn, frame)  # the only other type in ENVELOPE_KEYS

    async def _step_batch(self, conn: Conn, session: Session, data: dict[str, Any]) -> dict[str, Any]:
        """Run a batch of actions in order; stop after the first ``done`` or error.

        Each action goes through ``SessionManager.step`` exactly like a single ``step`` frame
        (validation, step count, where env code runs), so a batch is observably the same as
        that many ``step`` frames sent back to back — minus one frame, parse and send per step.
        """
        errors = batch_errors(data, self.max_batch_actions)
        if errors:
            raise ValidationError("Invalid message", data={"errors": errors})
        out, error = await self.ctx.sessions.step_batch(session, data["actions"], render=conn.render)
        if isinstance(error, OpenEnvError):
            out.append({"error": error.to_wire()})
            # The session's env is gone: the same fatal rule as a single step.
            conn.fatal = isinstance(error, SessionError) and session is conn.session
        elif error is not None:  # env or payload failure (incl. non-finite reward, B6)
            out.append({"error": {"message": str(error), "code": "EXECUTION_ERROR"}})
        return {"type": T_OBSERVATIONS, "data": out}

    # -- the ``sessions`` extension: several sessions over one connection (vector envs) -----------

    async def _open(self, conn: Conn, data: dict[str, Any]) -> dict[str, Any]:
        """Open another session on this connection; it lives until ``close_session`` or the end
        of the connection. Refused with ``CAPACITY_REACHED`` like any new session (not fatal)."""
        if data:  # nothing to configure yet: refuse keys rather than ignore them
            raise ValidationError("Invalid message", data={"errors": [
                extra_forbidden(["data", key], value) for key, value in data.items()]})
        # Driven by a live connection: counted as attached, so never reaped (B10).
        session = await self.ctx.sessions.open(owner=conn.owner, transport="ws", attach=True)
        conn.opened[session.id] = session
        return {"type": T_OPENED, "data": {"session_id": session.id}}

    async def _close_session(self, conn: Conn, data: dict[str, Any]) -> dict[str, Any]:
        sid = data.get("session_id", ABSENT)
        if sid is ABSENT or set(data) != {"session_id"} or type(sid) is not str:
            errors = [] if sid is not ABSENT else [missing(["data", "session_id"], data)]
            if sid is not ABSENT and type(sid) is not str:
                errors.append(string_type(["data", "session_id"], sid))
            errors.extend(extra_forbidden(["data", k], v) for k, v in data.items() if k != "session_id")
            raise ValidationError("Invalid message", data={"errors": errors})
        if sid == conn.session.id:
            raise ValidationError(
                "The connection's first session ends with the connection: send {\"type\":\"close\"} "
                "(close_session closes sessions opened with {\"type\":\"open\"}).",
                data={"session_id": sid})
        session = conn.opened.pop(sid, None)
        if session is None:
            raise unknown_session(["data", "session_id"], sid)
        await self._release(session, True, "closed")
        return {"type": T_CLOSED, "data": {"session_id": sid}}

    async def _step_many(self, conn: Conn, data: dict[str, Any]) -> dict[str, Any]:
        """One step in each of several sessions of this connection; one reply element per step.

        Steps are independent: a failed one is an ``{"error": ...}`` element and the others still
        run. Steps of inline envs run back to back on the loop; other envs' steps run
        concurrently (each session still executes its own steps in the frame's order).
        """
        errors = many_errors(data, self.max_batch_actions)
        if errors:
            raise ValidationError("Invalid message", data={"errors": errors})
        steps = data["steps"]
        first = conn.session
        items: list[tuple[Session, Any]] = []
        out: list[Any] = []
        for index, entry in enumerate(steps):
            sid = entry["session_id"]
            session = conn.lookup(sid)
            if session is None:
                out.append({"error": unknown_session(["data", "steps", index, "session_id"], sid).to_wire()})
            else:
                out.append(None)  # filled below, in order
                items.append((session, entry["action"]))
        results = iter(await self.ctx.sessions.step_many(items, render=conn.render))
        for index, element in enumerate(out):
            if element is not None:
                continue
            result = next(results)
            if isinstance(result, OpenEnvError):
                if isinstance(result, SessionError) and steps[index]["session_id"] == first.id:
                    conn.fatal = True  # the connection's first session is gone (upstream's fatal row)
                out[index] = {"error": result.to_wire()}
            elif isinstance(result, Exception):  # env or payload failure (incl. non-finite reward, B6)
                out[index] = {"error": {"message": str(result), "code": "EXECUTION_ERROR"}}
            else:
                out[index] = result
        return {"type": T_OBSERVATIONS, "data": out}

    def _hello(self, conn: Conn, frame: dict[str, Any]) -> dict[str, Any]:
        """Grant the requested extensions we support (unknown ones are simply not granted)."""
        data = frame.get("data") or {}
        want = data.get("want", [])
        if not isinstance(want, list):
            raise ValidationError("Invalid message", data={"errors": [list_type(["data", "want"], want)]})
        bad = [string_type(["data", "want", i], w) for i, w in enumerate(want) if not isinstance(w, str)]
        if bad:
            raise ValidationError("Invalid message", data={"errors": bad})
        granted = [ext for ext in EXTENSIONS if ext in want]
        conn.grant(granted)
        reply: dict[str, Any] = {
            "session_id": conn.session.id,
            "extensions": granted,
            "max_message_bytes": self.ctx.config.max_message_bytes,
            "protocol": PROTOCOL,
        }
        if conn.step_batch or conn.multiplex:
            reply["max_batch_actions"] = self.max_batch_actions
        return {"type": T_HELLO, "data": reply}

    async def _release(self, session: Session, owned: bool, reason: str) -> None:
        """Close (owned) or detach (attached) the session; survives cancellation of the handler."""
        await self._frames.release(self.ctx.sessions.detach(session, close=owned, reason=reason))


