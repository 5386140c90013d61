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
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

import orjson
from starlette.datastructures import Headers
from starlette.routing import BaseRoute, WebSocketRoute

from openenv.errors import ModeError, OpenEnvError, SessionError, ValidationError
from openenv.interfaces import ServerTransport
from openenv.sessions import Session
from openenv.types import observation_payload
from openenv.wire import JSONDecodeError, dumps, loads

from .frames import (
    BINARY_FRAME_MESSAGE,
    DATA_REQUIRED,
    ENVELOPE_KEYS,
    EXTENSIONS,
    MAX_BATCH_ACTIONS,
    PROTOCOL,
    SESSION_TARGETED,
    SESSIONS_KEYS,
    STEP_BATCH_KEYS,
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
from .stepargs import StepKwargsValidator

if TYPE_CHECKING:
    from openenv.server import ServerContext

__all__ = ["WebSocketTransport"]

log = logging.getLogger("openenv_transport_ws.server")

_ABSENT: Any = object()
_monotonic = time.monotonic
_fast_loads = orjson.loads
_FastDecodeError = orjson.JSONDecodeError


class _Conn:
    """Per-connection state: its sessions and what the client negotiated."""

    __slots__ = ("allowed", "fatal", "ids", "multiplex", "opened", "owner", "session", "step_batch",
                 "step_kwargs")

    def __init__(self, session: Session, owner: str | None) -> None:
        self.session = session  # the connection's first session (owned, or attached with ?session_id=)
        self.owner = owner
        #: Sessions opened on this connection with ``open`` (the ``sessions`` extension), by id.
        self.opened: dict[str, Session] = {}
        self.allowed = ENVELOPE_KEYS
        self.ids = False
        self.step_kwargs = False
        self.step_batch = False
        self.multiplex = False
        self.fatal = False

    def grant(self, extensions: list[str]) -> None:
        self.ids = "ids" in extensions
        self.step_kwargs = "step_kwargs" in extensions
        self.step_batch = "step_batch" in extensions
        self.multiplex = "sessions" in extensions
        allowed = dict(ENVELOPE_KEYS)
        if self.step_kwargs:
            allowed["step"] = allowed["step"] | {"kwargs"}
        if self.step_batch:
            allowed["step_batch"] = STEP_BATCH_KEYS
        if self.multiplex:
            allowed.update(SESSIONS_KEYS)
            for kind in SESSION_TARGETED & allowed.keys():
                allowed[kind] = allowed[kind] | {"session_id"}
        if self.ids:
            allowed = {t: keys | {"id"} for t, keys in allowed.items()}
        self.allowed = allowed

    def lookup(self, sid: Any) -> Session | None:
        """The session of this connection with id ``sid`` (its first, or one it opened)."""
        if sid == self.session.id:
            return self.session
        return self.opened.get(sid) if type(sid) is str else None

    def target(self, frame: dict[str, Any]) -> Session:
        """The session a frame names with ``session_id`` (its first session when it names none)."""
        if "session_id" not in frame:
            return self.session
        session = self.lookup(frame["session_id"])
        if session is None:
            raise _unknown_session(["session_id"], frame["session_id"])
        return session


class WebSocketTransport(ServerTransport):
    """Serves ``/ws``. Mounted by ``create_app`` when the ``ws`` transport is selected."""

    name = "ws"

    def __init__(self, ctx: ServerContext) -> None:
        super().__init__(ctx)
        sessions = ctx.sessions
        self._step_kwargs = StepKwargsValidator(ctx.env_class, is_async=sessions.is_async)
        self._cleanups: set[asyncio.Task[Any]] = set()
        # Opt-in strict production (B4): reset/step refused in production mode.
        self._strict_production = ctx.mode == "production" and bool(
            ctx.config.extra.get("strict_production"))
        self._binary_reply = dumps(error_frame(BINARY_FRAME_MESSAGE, "INVALID_JSON"))
        #: Most actions per ``step_batch`` frame (``ServerConfig.extra["max_batch_actions"]``).
        self.max_batch_actions = int(ctx.config.extra.get("max_batch_actions") or MAX_BATCH_ACTIONS)

    # -- ServerTransport --------------------------------------------------------------------------

    def routes(self) -> list[BaseRoute]:
        # An object that is neither a function nor a method is mounted by Starlette as a raw ASGI
        # app: no WebSocket wrapper object on the per-frame path.
        return [WebSocketRoute("/ws", self)]

    def capabilities(self) -> dict[str, Any]:
        return {"extensions": ["hello", *EXTENSIONS], "max_batch_actions": self.max_batch_actions}

    async def shutdown(self) -> None:
        if self._cleanups:
            await asyncio.gather(*list(self._cleanups), return_exceptions=True)

    # -- MCP ------------------------------------------------------------------------------------

    async def handle_mcp(self, session: Session, request: dict[str, Any]) -> dict[str, Any]:
        """Answer one tunnelled JSON-RPC request; the result becomes ``{"type":"mcp","data":...}``.

        Delegates to ``ctx.mcp_handler`` (set by the MCP transport). Without one this is
        upstream's answer for a non-MCP env (docs/protocol.md §4.5 kind D). Subclasses may override it.
        """
        handler = getattr(self.ctx, "mcp_handler", None)
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
        session_id = _query_session_id(scope)
        owned = not session_id
        # With token auth sessions are owned by the token's principal, as on every transport
        # (``ServerContext.principal``); without it, by no one.
        principal = self.ctx.principal(Headers(scope=scope))
        try:
            if owned:
                session = await sessions.open(owner=principal, transport="ws")
                session.connections += 1  # a connected session is never reaped (B10)
            else:
                session = sessions.attach(session_id, principal=principal)
        except Exception as exc:
            data = exc.to_wire() if isinstance(exc, OpenEnvError) else {
                "message": str(exc), "code": "SESSION_ERROR"}
            if await _send_text(send, dumps({"type": "error", "data": data})):
                await _close(send, 1000)
            return

        conn = _Conn(session, principal)
        ending: tuple[int, str] | None = None
        try:
            ending = await self._serve(conn, receive, send)
        finally:
            reason = "disconnected" if ending is None else "closed" if ending[0] == 1000 else ending[1]
            for extra in list(conn.opened.values()):
                await self._release(extra, True, reason)
            conn.opened.clear()
            await self._release(session, owned, reason)
        if ending is not None:
            await _close(send, *ending)

    async def _serve(self, conn: _Conn, receive: Callable[..., Any],
                     send: Callable[..., Any]) -> tuple[int, str] | None:
        """Frame loop. Returns the close (code, reason) to send, or None if the client is gone."""
        session = conn.session
        limit = self.ctx.config.max_message_bytes
        # Characters <= UTF-8 bytes <= 4 * characters: only texts longer than limit/4 characters
        # can exceed the limit, and only those pay for an encode to count bytes exactly.
        maybe_big = limit // 4
        while True:
            event = await receive()
            etype = event["type"]
            if etype != "websocket.receive":
                if etype == "websocket.disconnect":
                    return None
                continue
            session.last_activity = _monotonic()  # every frame is activity (B10)
            text = event.get("text")
            if text is None:
                size = len(event.get("bytes") or b"")
                if size > limit:
                    return 1009, _too_big(size, limit)
                reply: str | None = self._binary_reply
            else:
                if len(text) > maybe_big:
                    size = len(text.encode("utf-8", "surrogatepass"))
                    if size > limit:
                        return 1009, _too_big(size, limit)
                reply = await self._dispatch(conn, text)
            if reply is None:  # a valid {"type":"close"}: no reply
                return 1000, ""
            try:
                await send({"type": "websocket.send", "text": reply})
            except (OSError, RuntimeError):  # the client is gone (see _send_text)
                return None
            if conn.fatal:
                return 1000, ""

    async def _dispatch(self, conn: _Conn, text: str) -> str | None:
        """One inbound text frame → its encoded reply (None for ``close``)."""
        try:
            frame = _fast_loads(text)
        except _FastDecodeError:
            try:
                loads(text)  # the standard library's message, as upstream sends it
            except JSONDecodeError as exc:
                return dumps(error_frame(f"Invalid JSON: {exc}", "INVALID_JSON"))
            raise  # pragma: no cover - orjson refused what json accepts
        if type(frame) is not dict:
            return dumps(not_an_object(frame))
        ftype = frame.get("type", "")
        reply: dict[str, Any]
        if ftype == "step" and len(frame) == 2 and type(frame.get("data")) is dict:
            # The hot path: {"type":"step","data":{...}} is valid under every negotiation, so the
            # envelope checks below have nothing to say about it.
            try:
                if self._strict_production:
                    raise _mode_error("step")
                obs = await self.ctx.sessions.step(conn.session, frame["data"])
                return dumps({"type": "observation", "data": observation_payload(obs)})
            except OpenEnvError as exc:
                conn.fatal = isinstance(exc, SessionError)
                return dumps({"type": "error", "data": exc.to_wire()})
            except Exception as exc:  # env or serialisation failure (incl. non-finite reward, B6)
                return dumps(error_frame(str(exc), "EXECUTION_ERROR"))
        allowed = conn.allowed.get(ftype) if type(ftype) is str else None
        if allowed is None:
            reply = error_frame(f"Unknown message type: {ftype}", "UNKNOWN_TYPE")
        elif not (frame.keys() <= allowed) or _bad_payload(frame, ftype, allowed):
            reply = invalid_message(envelope_errors(frame, ftype, allowed))
        elif ftype == "close":
            return None
        else:
            try:
                reply = await self._handle(conn, ftype, frame)
            except OpenEnvError as exc:
                reply = {"type": "error", "data": exc.to_wire()}
                # The session's env is gone (e.g. closed at server shutdown): upstream's fatal row.
                # Only the connection's first session takes the connection down with it.
                conn.fatal = isinstance(exc, SessionError) and \
                    frame.get("session_id", conn.session.id) == conn.session.id
            except Exception as exc:  # env or serialisation failure (incl. non-finite reward, B6)
                reply = error_frame(str(exc), "EXECUTION_ERROR")
        # hello (ours, never sent by upstream peers) may always carry an id.
        echo = "id" in frame and (conn.ids or ftype == "hello")
        if echo:
            reply["id"] = frame["id"]
        try:
            return dumps(reply)
        except Exception as exc:  # an env returned something JSON cannot carry (docs/protocol.md §3.6)
            fallback = error_frame(str(exc), "EXECUTION_ERROR")
            if echo:
                fallback["id"] = frame["id"]
            return dumps(fallback)

    async def _handle(self, conn: _Conn, ftype: str, frame: dict[str, Any]) -> dict[str, Any]:
        """Run one valid frame against the session; raises ``OpenEnvError`` for error frames."""
        sessions = self.ctx.sessions
        session = conn.target(frame) if conn.multiplex else conn.session
        if ftype == "step":
            if self._strict_production:
                raise _mode_error("step")
            kwargs = frame.get("kwargs")
            if kwargs:
                kwargs = self._step_kwargs(kwargs)
            obs = await sessions.step(session, frame["data"], kwargs)
            return {"type": "observation", "data": observation_payload(obs)}
        if ftype == "step_batch":
            return await self._step_batch(conn, session, frame["data"])
        if ftype == "step_many":
            return await self._step_many(conn, frame["data"])
        if ftype == "open":
            return await self._open(conn, frame.get("data") or {})
        if ftype == "close_session":
            return await self._close_session(conn, frame["data"])
        if ftype == "reset":
            if self._strict_production:
                raise _mode_error("reset")
            obs = await sessions.reset(session, frame.get("data") or {})
            return {"type": "observation", "data": observation_payload(obs)}
        if ftype == "state":
            return {"type": "state", "data": await sessions.state(session)}
        if ftype == "mcp":
            return {"type": "mcp", "data": await self.handle_mcp(session, frame["data"])}
        return self._hello(conn, frame)  # the only other type in ENVELOPE_KEYS

    async def _step_batch(self, conn: _Conn, session: Session, data: dict[str, Any]) -> dict[str, Any]:
        """Run a batch of actions in order; stop after the first ``done`` or error.

        Each action goes through ``SessionManager.step`` exactly like a single ``step`` frame
        (validation, step count, where env code runs), so a batch is observably the same as
        that many ``step`` frames sent back to back — minus one frame, parse and send per step.
        """
        errors = batch_errors(data, self.max_batch_actions)
        if errors:
            raise ValidationError("Invalid message", data={"errors": errors})
        if self._strict_production:
            raise _mode_error("step_batch")
        out, error = await self.ctx.sessions.step_batch(session, data["actions"], observation_payload)
        if isinstance(error, OpenEnvError):
            out.append({"error": error.to_wire()})
            # The session's env is gone: the same fatal rule as a single step.
            conn.fatal = isinstance(error, SessionError) and session is conn.session
        elif error is not None:  # env or payload failure (incl. non-finite reward, B6)
            out.append({"error": {"message": str(error), "code": "EXECUTION_ERROR"}})
        return {"type": "observations", "data": out}

    # -- the ``sessions`` extension: several sessions over one connection (vector envs) -----------

    async def _open(self, conn: _Conn, data: dict[str, Any]) -> dict[str, Any]:
        """Open another session on this connection; it lives until ``close_session`` or the end
        of the connection. Refused with ``CAPACITY_REACHED`` like any new session (not fatal)."""
        if data:  # nothing to configure yet: refuse keys rather than ignore them
            raise ValidationError("Invalid message", data={"errors": [
                extra_forbidden(["data", key], value) for key, value in data.items()]})
        session = await self.ctx.sessions.open(owner=conn.owner, transport="ws")
        session.connections += 1  # driven by a live connection: never reaped (B10)
        conn.opened[session.id] = session
        return {"type": "opened", "data": {"session_id": session.id}}

    async def _close_session(self, conn: _Conn, data: dict[str, Any]) -> dict[str, Any]:
        sid = data.get("session_id", _ABSENT)
        if sid is _ABSENT or set(data) != {"session_id"} or type(sid) is not str:
            errors = [] if sid is not _ABSENT else [missing(["data", "session_id"], data)]
            if sid is not _ABSENT and type(sid) is not str:
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
            raise _unknown_session(["data", "session_id"], sid)
        await self._release(session, True, "closed")
        return {"type": "closed", "data": {"session_id": sid}}

    async def _step_many(self, conn: _Conn, data: dict[str, Any]) -> dict[str, Any]:
        """One step in each of several sessions of this connection; one reply element per step.

        Steps are independent: a failed one is an ``{"error": ...}`` element and the others still
        run. Steps of inline envs run back to back on the loop; other envs' steps run
        concurrently (each session still executes its own steps in the frame's order).
        """
        errors = many_errors(data, self.max_batch_actions)
        if errors:
            raise ValidationError("Invalid message", data={"errors": errors})
        if self._strict_production:
            raise _mode_error("step_many")
        steps = data["steps"]
        first = conn.session
        items: list[tuple[Session, Any]] = []
        out: list[Any] = []
        for index, entry in enumerate(steps):
            sid = entry["session_id"]
            session = conn.lookup(sid)
            if session is None:
                out.append({"error": _unknown_session(["data", "steps", index, "session_id"], sid).to_wire()})
            else:
                out.append(None)  # filled below, in order
                items.append((session, entry["action"]))
        results = iter(await self.ctx.sessions.step_many(items, observation_payload))
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
        return {"type": "observations", "data": out}

    def _hello(self, conn: _Conn, frame: dict[str, Any]) -> dict[str, Any]:
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
        return {"type": "hello", "data": reply}

    async def _release(self, session: Session, owned: bool, reason: str) -> None:
        """Close (owned) or detach (attached) the session; survives cancellation of the handler."""
        sessions = self.ctx.sessions
        if owned:
            session.connections = max(0, session.connections - 1)
            task = asyncio.ensure_future(sessions.close(session, reason))
        else:
            task = asyncio.ensure_future(sessions.detach(session))
        self._cleanups.add(task)
        task.add_done_callback(self._cleanups.discard)
        # shield: if this handler is cancelled (server shutdown), the close still completes.
        await asyncio.shield(task)


def _bad_payload(frame: dict[str, Any], ftype: str, allowed: frozenset[str]) -> bool:
    """Whether ``data``/``kwargs`` break their rules (keys already known to be allowed)."""
    if "data" in allowed:
        data = frame.get("data", _ABSENT)
        if data is _ABSENT:
            if ftype in DATA_REQUIRED:
                return True
        elif type(data) is not dict:
            return True
    return "kwargs" in frame and type(frame["kwargs"]) is not dict


def _unknown_session(loc: list[Any], sid: Any) -> ValidationError:
    return ValidationError(
        f"Unknown session_id {sid!r} on this connection: name the connection's first session (its id "
        "is in the hello reply) or one opened on it with {\"type\":\"open\"}.",
        data={"errors": [{"type": "unknown_session", "loc": loc, "msg": "Unknown session on this connection",
                          "input": sid}]})


def _mode_error(what: str) -> ModeError:
    return ModeError(
        f"{what} is not available: the server runs in production mode with strict_production "
        "enabled. Use the env's tools (MCP), or serve it in simulation mode or without "
        "strict_production to drive episodes with reset/step."
    )


def _query_session_id(scope: dict[str, Any]) -> str:
    query = scope.get("query_string") or b""
    if not query:
        return ""
    value = ""
    for key, val in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
        if key == "session_id":
            value = val  # the last one wins, as in Starlette's query_params.get()
    return value


def _too_big(size: int, limit: int) -> str:
    # A close reason must fit in 123 bytes.
    return f"Message of {size} bytes exceeds the server limit max_message_bytes={limit}"


async def _send_text(send: Callable[..., Any], text: str) -> bool:
    """Send one text frame; False when the client is gone (uvicorn raises an OSError subclass,
    other servers a RuntimeError)."""
    try:
        await send({"type": "websocket.send", "text": text})
    except (OSError, RuntimeError):
        return False
    return True


async def _close(send: Callable[..., Any], code: int, reason: str = "") -> None:
    try:
        await send({"type": "websocket.close", "code": code, "reason": reason})
    except (OSError, RuntimeError):
        pass
