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

import logging
import secrets
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

from pydantic import Field
from starlette.datastructures import Headers
from starlette.requests import ClientDisconnect
from starlette.requests import Request as HttpRequest
from starlette.responses import Response
from starlette.routing import BaseRoute, Route, WebSocketRoute

from openenv.context import ServerContext, TransportOptions
from openenv.frameloop import Ending, FrameLoop, close, send_text
from openenv.interfaces import ServerTransport
from openenv.limits import loads
from openenv.wire import JSONDecodeError, dumps, dumps_bytes
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
        options: McpOptions = ctx.options_for(self)
        #: The kernel's frame loop: first-frame timeout, size limit, body budget, vanished clients.
        self._frames = FrameLoop(
            ctx, first_frame_timeout_s=options.first_frame_timeout_s, label="WebSocket /mcp",
            binary_reply=dumps(error(None, PARSE_ERROR, "Parse error: binary frames are not supported; "
                                     "send JSON text frames")),
            busy_reply=lambda detail: dumps(error(None, SERVER_ERROR, detail, {"code": "CAPACITY_REACHED"})))
        self._mcp_sessions: dict[str, _McpHttpSession] = {}

    # -- ServerTransport ------------------------------------------------------------------------

    def routes(self) -> list[BaseRoute]:
        return [Route("/mcp", self._http, methods=["POST", "GET", "DELETE"]),
                WebSocketRoute("/mcp", _RawAsgi(self._websocket))]

    async def shutdown(self) -> None:
        await self._frames.drain()
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

    async def _websocket(self, scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        if scope["type"] != "websocket" or (await receive())["type"] != "websocket.connect":
            return
        # Accept first, like upstream: refusals below reach the client as a readable frame.
        try:
            await send({"type": "websocket.accept"})
        except (OSError, RuntimeError):  # the client left before the handshake completed
            return
        peer = Peer("ws", principal=self.ctx.principal(Headers(scope=scope)))
        try:
            # A connected session is never reaped (B10): the connection is counted from the start.
            session = await self.handler.open_session(peer, "mcp-ws", attach=True)
        except RequestError as exc:
            if await send_text(send, dumps(error(None, exc.code, exc.message, exc.data))):
                await close(send, 1000)
            return
        peer.session = session
        ending: Ending = None
        try:
            ending = await self._frames.run(scope, receive, send, partial(self._dispatch, peer),
                                            session_id=session.id)
        finally:
            await self._frames.release(self.ctx.sessions.detach(session, close=True, reason="disconnected"))
        await FrameLoop.close(send, ending)

    async def _dispatch(self, peer: Peer, text: str) -> str | None:
        reply = await self._answer(peer, text)
        return None if reply is None else dumps(reply)  # a notification has no response

    async def _answer(self, peer: Peer, text: str) -> dict[str, Any] | None:
        try:
            obj = loads(text)
        except (JSONDecodeError, ValueError) as exc:
            return error(None, PARSE_ERROR, f"Parse error: {exc}")
        if isinstance(obj, list):
            return error(None, INVALID_REQUEST, "Batch requests are not supported")
        return await self.handler.handle(peer, obj)


class _RawAsgi:
    """Mounts a bound method as a raw ASGI app (Starlette wraps functions and methods in its
    ``WebSocket`` object; the kernel's frame loop speaks plain ASGI)."""

    __slots__ = ("app",)

    def __init__(self, app: Callable[..., Awaitable[None]]) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        await self.app(scope, receive, send)
