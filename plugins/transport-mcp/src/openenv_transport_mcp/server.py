"""The ``mcp`` server transport: ``/mcp`` over HTTP and WebSocket, and the ``/ws`` tunnel.

Routes (docs/protocol.md §4.1, §11 B9, B14, B16):

* ``POST /mcp`` — three kinds of peers, told apart without guessing:

  - a request carrying an ``Mcp-Session-Id`` header belongs to an MCP session (Streamable HTTP,
    JSON response mode): answered with ``application/json``, notifications with ``202`` and an
    empty body, an unknown or ended session with ``404`` (the client then initializes again);
  - ``initialize`` without that header starts an MCP session bound to an OpenEnv session: a new
    one (counted against capacity), or the one named by an ``OpenEnv-Session-Id`` header; the
    reply carries the new ``Mcp-Session-Id``;
  - anything else is upstream's OpenEnv dialect: HTTP 200 for every JSON-RPC answer, ``-32700
    Parse error`` for undecodable bodies and batches, ``params.session_id`` or a one-shot session.

* ``DELETE /mcp`` ends an MCP session (and closes the OpenEnv session it created); ``GET /mcp``
  is ``405``: this server sends no server-initiated messages.
* WebSocket ``/mcp``: one connection = one session (capacity and factory failures are one
  ``-32000`` frame, then close); one reply per request frame; bad JSON, binary frames, batches and
  invalid requests are answered and the connection stays open (B9). ``initialize`` switches the
  connection to MCP results. A connection that sends no frame within ``first_frame_timeout_s``
  (option, default 60 s) is closed with ``1008`` and its session slot freed; messages of
  ``BUDGETED_MESSAGE_BYTES`` and up are held against the server's body budget while they are
  answered (past it: a ``-32000`` ``CAPACITY_REACHED`` error, the connection kept).
* ``/ws`` ``{"type":"mcp"}`` frames: ``ctx.mcp_handler`` (set here) answers them on the
  connection's session.

With token auth, ownership follows the credential: a session created with one token can be used
and closed only with that token (others get ``Unknown session_id``, revealing nothing).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

from pydantic import Field
from starlette.requests import ClientDisconnect
from starlette.requests import Request as HttpRequest
from starlette.responses import Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.websockets import WebSocket

from openenv.context import ServerContext, TransportOptions
from openenv.interfaces import ServerTransport
from openenv.limits import loads
from openenv.tools import MCP_ACTION_TYPES, CallToolAction, ToolEnvironment, dispatch_action
from openenv.wire import JSONDecodeError, dumps, dumps_bytes
from openenv.wsguard import transport_hold_min
from openenv_transport_mcp.handler import SUPPORTED_PROTOCOL_VERSIONS, McpHandler, Peer
from openenv_transport_mcp.jsonrpc import (
    INVALID_REQUEST,
    PARSE_ERROR,
    SERVER_ERROR,
    RequestError,
    error,
    parse_request,
    result,
)

__all__ = ["MCP_SESSION_HEADER", "OPENENV_SESSION_HEADER", "McpOptions", "McpTransport"]

log = logging.getLogger("openenv.transport.mcp")

#: Streamable HTTP session header (MCP).
MCP_SESSION_HEADER = "mcp-session-id"
#: Names an existing OpenEnv session for an MCP session to bind to (same header as the REST transport).
OPENENV_SESSION_HEADER = "openenv-session-id"
_PROTOCOL_HEADER = "mcp-protocol-version"
#: MCP sessions that may share one existing OpenEnv session (bounds the table under abuse).
_MAX_BINDINGS = 8


@dataclass
class _McpHttpSession:
    id: str
    peer: Peer
    owns_session: bool


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(dumps_bytes(body), status_code=status, media_type="application/json", headers=headers)


class McpOptions(TransportOptions):
    """Options of the ``mcp`` transport (``ServerConfig(transport_options={"mcp": {...}})``)."""

    #: Seconds a new WebSocket ``/mcp`` connection (which holds a session slot) has to send its
    #: first frame before it is closed with 1008; ``None`` waits forever.
    first_frame_timeout_s: float | None = Field(default=60.0, gt=0)


class McpTransport(ServerTransport):
    """Serves ``/mcp`` and answers ``/ws`` MCP frames. Mounted by ``create_app`` as ``"mcp"``."""

    name = "mcp"
    options_type: ClassVar[type[TransportOptions]] = McpOptions

    def __init__(self, ctx: ServerContext) -> None:
        super().__init__(ctx)
        self.handler = McpHandler(ctx)
        ctx.mcp_handler = self.handler
        action_type = ctx.sessions.action_type
        cls = ctx.env_class
        is_tool_env = isinstance(cls, type) and issubclass(cls, ToolEnvironment)
        if action_type in MCP_ACTION_TYPES and not is_tool_env:
            # Spec §2.5: {"type":"list_tools"|"call_tool"} objects are MCP actions for envs whose
            # action type is the base Action or an MCP action. Tool envs dispatch on their own.
            other = None if action_type is CallToolAction else action_type
            ctx.sessions.set_action_adapter(partial(dispatch_action, other=other))
        self._mcp_sessions: dict[str, _McpHttpSession] = {}
        self._cleanups: set[asyncio.Task[Any]] = set()

    # -- ServerTransport ------------------------------------------------------------------------

    def routes(self) -> list[BaseRoute]:
        return [Route("/mcp", self._http, methods=["POST", "GET", "DELETE"]),
                WebSocketRoute("/mcp", self._websocket)]

    async def shutdown(self) -> None:
        if self._cleanups:
            await asyncio.gather(*list(self._cleanups), return_exceptions=True)
        self._mcp_sessions.clear()

    def capabilities(self) -> dict[str, Any]:
        return {"extensions": ["mcp"], "mcp_protocol_versions": list(SUPPORTED_PROTOCOL_VERSIONS)}

    # -- HTTP -----------------------------------------------------------------------------------

    async def _http(self, request: HttpRequest) -> Response:
        if request.method == "GET":
            return _json({"detail": "This server sends no server-initiated messages: POST JSON-RPC "
                          "requests to /mcp."}, 405, {"allow": "POST, DELETE"})
        if request.method == "DELETE":
            return await self._delete(request)
        limit = self.ctx.config.max_message_bytes
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            return _json(error(None, INVALID_REQUEST, f"Request too large: {declared} bytes; this server accepts "
                               f"at most {limit} bytes per request."), 413)
        try:
            body = await request.body()
        except ClientDisconnect:  # gone, or cut off by the kernel's body limit (already answered 413)
            return Response(status_code=400)
        if len(body) > limit:
            return _json(error(None, INVALID_REQUEST, f"Request too large: {len(body)} bytes; this server accepts "
                               f"at most {limit} bytes per request."), 413)
        mcp_sid = request.headers.get(MCP_SESSION_HEADER)
        try:
            obj = loads(body)
        except (JSONDecodeError, ValueError):
            return _json(error(None, PARSE_ERROR, "Parse error"))
        if mcp_sid is not None:
            return await self._in_mcp_session(request, mcp_sid, obj)
        if isinstance(obj, dict) and obj.get("method") == "initialize":
            return await self._initialize(request, obj)
        if not isinstance(obj, dict):  # upstream: batches and other non-objects are parse errors
            return _json(error(None, PARSE_ERROR, "Parse error"))
        peer = Peer("http", principal=self.ctx.principal(request.headers))
        response = await self.handler.handle(peer, obj)
        return Response(status_code=202) if response is None else _json(response)

    async def _initialize(self, request: HttpRequest, obj: dict[str, Any]) -> Response:
        try:
            req = parse_request(obj)
        except RequestError as exc:
            return _json(exc.response())
        if req.is_notification:
            return _json(error(None, INVALID_REQUEST, "Invalid request: initialize is a request and needs an id"))
        peer = Peer("mcp-http", principal=self.ctx.principal(request.headers))
        bind = request.headers.get(OPENENV_SESSION_HEADER)
        try:
            if bind:
                session = self.handler.lookup(bind, peer.principal)
                self._prune()
                bound = sum(1 for s in self._mcp_sessions.values() if s.peer.session is session)
                if bound >= _MAX_BINDINGS:
                    raise RequestError(SERVER_ERROR, f"Too many MCP sessions bound to session {bind} "
                                       f"({bound}); end one with DELETE /mcp first.")
            else:
                session = await self.handler.open_session(peer, "mcp")
            peer.session = session
            init = self.handler.initialize(peer, req.params)
        except RequestError as exc:
            return _json(error(req.id, exc.code, exc.message, exc.data))
        self._prune()
        mcp_sid = secrets.token_hex(16)
        self._mcp_sessions[mcp_sid] = _McpHttpSession(mcp_sid, peer, owns_session=not bind)
        return _json(result(req.id, init), headers={MCP_SESSION_HEADER: mcp_sid})

    async def _in_mcp_session(self, request: HttpRequest, mcp_sid: str, obj: Any) -> Response:
        state = self._mcp_session(request, mcp_sid)
        if state is None:
            return _json(error(None, INVALID_REQUEST, f"Unknown MCP session: {mcp_sid}. It ended or expired; "
                               "send initialize (without Mcp-Session-Id) to start a new one."), 404)
        version = request.headers.get(_PROTOCOL_HEADER)
        if version and version not in SUPPORTED_PROTOCOL_VERSIONS:
            return _json(error(None, INVALID_REQUEST, f"Unsupported MCP-Protocol-Version: {version}. Supported: "
                               f"{', '.join(SUPPORTED_PROTOCOL_VERSIONS)}."), 400)
        if isinstance(obj, list):
            return _json(error(None, INVALID_REQUEST, "Batch requests are not supported"))
        if isinstance(obj, dict) and "method" not in obj and ("result" in obj or "error" in obj):
            return Response(status_code=202)  # a reply to a server request; this server sends none
        response = await self.handler.handle(state.peer, obj)
        return Response(status_code=202) if response is None else _json(response)

    def _mcp_session(self, request: HttpRequest, mcp_sid: str) -> _McpHttpSession | None:
        state = self._mcp_sessions.get(mcp_sid)
        if state is None or state.peer.principal != self.ctx.principal(request.headers):
            return None
        session = state.peer.session
        if session is None or session.closed:  # reaped or closed elsewhere: the MCP session ends too
            self._mcp_sessions.pop(mcp_sid, None)
            return None
        return state

    async def _delete(self, request: HttpRequest) -> Response:
        mcp_sid = request.headers.get(MCP_SESSION_HEADER)
        if not mcp_sid:
            return _json({"detail": "DELETE /mcp ends an MCP session: send its Mcp-Session-Id header."}, 400)
        state = self._mcp_session(request, mcp_sid)
        if state is None:
            return _json({"detail": f"Unknown MCP session: {mcp_sid}"}, 404)
        self._mcp_sessions.pop(mcp_sid, None)
        session = state.peer.session
        if state.owns_session and session is not None:
            await self.ctx.sessions.request_close(session, "MCP session ended")
        return Response(status_code=204)

    def _prune(self) -> None:
        for sid in [k for k, s in self._mcp_sessions.items() if s.peer.session is None or s.peer.session.closed]:
            del self._mcp_sessions[sid]

    # -- WebSocket ------------------------------------------------------------------------------

    async def _websocket(self, websocket: WebSocket) -> None:
        # Accept first, like upstream: refusals below reach the client as a readable frame.
        await websocket.accept()
        peer = Peer("ws", principal=self.ctx.principal(websocket.headers))
        try:
            # A connected session is never reaped (B10): the connection is counted from the start.
            session = await self.handler.open_session(peer, "mcp-ws", attach=True)
        except RequestError as exc:
            await _send(websocket, error(None, exc.code, exc.message, exc.data))
            await _close(websocket)
            return
        peer.session = session
        try:
            await self._serve(websocket, peer)
        finally:
            # Closing must finish even if this handler is being cancelled (server shutdown).
            task = asyncio.ensure_future(self.ctx.sessions.detach(session, close=True, reason="disconnected"))
            self._cleanups.add(task)
            task.add_done_callback(self._cleanups.discard)
            await asyncio.shield(task)

    async def _serve(self, websocket: WebSocket, peer: Peer) -> None:
        first = self.ctx.options_for(self).first_frame_timeout_s
        budget = self.ctx.body_budget
        hold_min = transport_hold_min(websocket.scope, self.ctx.config.max_message_bytes)
        while True:
            if first is None:
                message = await websocket.receive()
            else:
                try:
                    message = await asyncio.wait_for(websocket.receive(), first)
                except TimeoutError:
                    session = peer.session
                    log.warning("closed WebSocket /mcp connection of session %s: no frame within %s s",
                                session.id if session is not None else "?", first)
                    with contextlib.suppress(Exception):
                        await websocket.close(1008, f"no frame within {first} s of connecting")
                    return
                first = None
            if message["type"] == "websocket.disconnect":
                return
            text = message.get("text")
            held = 0
            reply: dict[str, Any] | None
            try:
                if text is None:
                    reply = error(None, PARSE_ERROR, "Parse error: binary frames are not supported; send JSON "
                                  "text frames")
                elif len(text) < hold_min:
                    reply = await self._answer(peer, text)
                elif budget.take(len(text)):
                    held = len(text)
                    reply = await self._answer(peer, text)
                else:
                    log.warning("refused a %d-character WebSocket /mcp frame: body budget spent", len(text))
                    reply = error(None, SERVER_ERROR, budget.busy_detail(len(text)), {"code": "CAPACITY_REACHED"})
                del text, message
                if reply is not None and not await _send(websocket, reply):
                    return
            finally:
                if held:  # held from take() until the reply is sent, whatever happens
                    budget.give(held)

    async def _answer(self, peer: Peer, text: str) -> dict[str, Any] | None:
        try:
            obj = loads(text)
        except (JSONDecodeError, ValueError) as exc:
            return error(None, PARSE_ERROR, f"Parse error: {exc}")
        if isinstance(obj, list):
            return error(None, INVALID_REQUEST, "Batch requests are not supported")
        return await self.handler.handle(peer, obj)


async def _send(websocket: WebSocket, body: dict[str, Any]) -> bool:
    try:
        await websocket.send_text(dumps(body))
    except Exception:  # the peer is gone
        return False
    return True


async def _close(websocket: WebSocket) -> None:
    try:
        await websocket.close(1000)
    except Exception:
        pass
