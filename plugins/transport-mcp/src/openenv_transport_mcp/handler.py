"""One JSON-RPC handler for every carrier: ``POST /mcp``, WebSocket ``/mcp`` and ``/ws`` frames.

Two dialects share it (docs/protocol.md §4, §11 B14):

* **OpenEnv dialect** for peers that never ``initialize`` (upstream's ``MCPToolClient``):
  ``tools/list``, ``tools/call``, ``openenv/session/create|close`` with upstream's shapes, codes and
  messages. Tool failures are ``-32603`` errors, as upstream's client expects, with
  ``error.data = {"error_type": ...}`` saying where the call failed (B7). Results carry the
  snake_case keys upstream clients read plus the camelCase MCP keys.
* **MCP** after ``initialize``: ``ping``, notifications (never answered), ``tools/list``,
  ``tools/call`` with ``structuredContent``/``isError``; tool failures are ``isError: true``
  results with ``_meta["openenv/error_type"]``; a call scored by the server's rubric carries its
  components in ``_meta["openenv/reward_components"]`` (and ``"openenv/reward_details"``).

Both dialects read the Task API as resources (``resources/list``, ``resources/templates/list``,
``resources/read``; ``openenv_transport_mcp.resources``, docs/protocol.md §13); they need no session.

Tools come from the session env's registry, filtered by the server's mode on every path (B5).
Every ``tools/call`` runs as a step of its session, so the session lock, deadlines, activity
tracking and the env's reward hook apply whatever the carrier.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from openenv.errors import CapacityError, FactoryError, OpenEnvError, SessionError, ValidationError
from openenv.tools import (
    CallToolAction,
    CallToolObservation,
    ListToolsAction,
    ListToolsObservation,
    ToolEnvironment,
)
from openenv.types import StepOutcome
from openenv_transport_mcp.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    SERVER_ERROR,
    Request,
    RequestError,
    error,
    parse_request,
    result,
)
from openenv_transport_mcp.resources import TaskResources

if TYPE_CHECKING:
    from openenv.context import ServerContext
    from openenv.sessions import Session

__all__ = ["LATEST_PROTOCOL_VERSION", "SUPPORTED_PROTOCOL_VERSIONS", "McpHandler", "Peer"]

log = logging.getLogger("openenv.transport.mcp")

#: MCP revisions negotiated through ``initialize``, newest first.
SUPPORTED_PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
LATEST_PROTOCOL_VERSION = SUPPORTED_PROTOCOL_VERSIONS[0]
_NOT_MCP = "Environment does not support MCP"


@dataclass
class Peer:
    """Who is calling, over which carrier, and what it negotiated.

    ``session`` is the carrier's own OpenEnv session (a WebSocket's, or the one an MCP HTTP
    session is bound to); ``None`` for plain ``POST /mcp``, where ``params.session_id`` or a
    one-shot session is used.
    """

    carrier: str
    principal: str | None = None
    session: Session | None = None
    mcp: bool = False
    protocol_version: str | None = None
    client_info: dict[str, Any] | None = None
    #: ``/ws`` correlates replies by position, so even notifications get one there.
    reply_to_notifications: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def owns(session: Session, principal: str | None) -> bool:
    """Whether ``principal`` may use or close ``session`` (sessions without an owner are open)."""
    return session.owner is None or session.owner == principal


class McpHandler:
    """Answers JSON-RPC requests against the sessions of one server."""

    def __init__(self, ctx: ServerContext) -> None:
        self.ctx = ctx
        self.sessions = ctx.sessions
        cls = ctx.env_class
        self._class_is_tool_env = isinstance(cls, type) and issubclass(cls, ToolEnvironment)
        # Spec §4.5 kind B: an env without tools whose action type is an MCP action type.
        self._step_kind = ctx.action_type in (CallToolAction, ListToolsAction)
        self._server_info: dict[str, Any] | None = None
        self._tunnel_peers: dict[str, Peer] = {}
        self.task_resources = TaskResources(ctx.task_service)

    # -- entry points ---------------------------------------------------------------------------

    async def handle(self, peer: Peer, obj: Any) -> dict[str, Any] | None:
        """Answer one decoded request object; ``None`` when no reply is due (a notification)."""
        try:
            request = parse_request(obj)
        except RequestError as exc:
            return exc.response()
        try:
            response = await self._dispatch(peer, request)
        except RequestError as exc:
            response = error(request.id, exc.code, exc.message, exc.data)
        except OpenEnvError as exc:
            # data.code is the OpenEnv error code, the same one /ws and HTTP report for this request.
            response = error(request.id, INTERNAL_ERROR, exc.message, _error_data(exc))
        except Exception as exc:
            log.exception("MCP request %r failed", request.method)
            response = error(request.id, INTERNAL_ERROR, str(exc) or type(exc).__name__)
        if request.is_notification and not peer.reply_to_notifications:
            return None
        return response

    async def __call__(self, session: Session, request: Any) -> dict[str, Any]:
        """``ServerContext.mcp_handler``: a JSON-RPC request tunnelled in a ``/ws`` frame."""
        peer = self._tunnel_peers.get(session.id)
        if peer is None or peer.session is not session:
            for sid in [k for k, p in self._tunnel_peers.items() if p.session is None or p.session.closed]:
                del self._tunnel_peers[sid]
            peer = Peer("tunnel", principal=session.owner, session=session, reply_to_notifications=True)
            self._tunnel_peers[session.id] = peer
        response = await self.handle(peer, request)
        assert response is not None  # reply_to_notifications
        return response

    # -- methods --------------------------------------------------------------------------------

    async def _dispatch(self, peer: Peer, req: Request) -> dict[str, Any]:
        method = req.method
        if method == "tools/call":
            return await self._tools_call(peer, req)
        if method == "tools/list":
            return await self._tools_list(peer, req)
        if method == "initialize":
            return result(req.id, self.initialize(peer, req.params))
        if method == "ping":
            return result(req.id, {})
        if method.startswith("notifications/"):
            return result(req.id, None)
        if method.startswith("resources/"):
            return result(req.id, self._resources(method, req.params))
        if method == "openenv/session/create":
            return result(req.id, await self._session_create(peer))
        if method == "openenv/session/close":
            return result(req.id, await self._session_close(peer, req.params))
        raise RequestError(METHOD_NOT_FOUND, f"Method not found: {method}")

    def initialize(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        """Negotiate MCP on this peer and return the ``initialize`` result."""
        if peer.mcp:
            raise RequestError(INVALID_REQUEST, "Invalid request: this MCP session is already initialized")
        requested = params.get("protocolVersion")
        version = requested if requested in SUPPORTED_PROTOCOL_VERSIONS else LATEST_PROTOCOL_VERSION
        peer.mcp, peer.protocol_version = True, version
        info = params.get("clientInfo")
        peer.client_info = info if isinstance(info, dict) else None
        capabilities: dict[str, Any] = {"tools": {"listChanged": False}}
        if self.task_resources.declared:  # an env without tasks has no resources to offer
            capabilities["resources"] = {"subscribe": False, "listChanged": False}
        return {"protocolVersion": version, "capabilities": capabilities, **self.server_info()}

    def _resources(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "resources/read":
            return self.task_resources.read(params)
        if method == "resources/list":
            return self.task_resources.list()
        if method == "resources/templates/list":
            return self.task_resources.templates()
        raise RequestError(METHOD_NOT_FOUND, f"Method not found: {method}")

    def server_info(self) -> dict[str, Any]:
        if self._server_info is None:
            md = self.ctx.metadata()
            self._server_info = {"serverInfo": {"name": self.ctx.env_name, "version": md.version or "0"}}
            if md.description:
                self._server_info["instructions"] = md.description
        return self._server_info

    async def _tools_list(self, peer: Peer, req: Request) -> dict[str, Any]:
        self._check_supported(peer)
        session, one_shot = await self._target(peer, req.params)
        try:
            env = session.env
            if isinstance(env, ToolEnvironment):
                self.sessions.touch(session)
                return result(req.id, {"tools": [spec.mcp_entry() for spec in env.list_tools()]})
            if not self._step_kind:
                raise RequestError(INTERNAL_ERROR, _NOT_MCP)
            obs = await self.sessions.call_tool(session, {"type": "list_tools"})
            if not isinstance(obs, ListToolsObservation):
                raise RequestError(INTERNAL_ERROR, f"MCP-style tools/list step returned {type(obs).__name__}, "
                                   "expected ListToolsObservation")
            return result(req.id, {"tools": [t.model_dump(mode="json") for t in obs.tools]})
        finally:
            if one_shot:
                await self.sessions.close(session, "one-shot MCP request")

    async def _tools_call(self, peer: Peer, req: Request) -> dict[str, Any]:
        params = req.params
        name = params.get("name")
        if not name:
            raise RequestError(INVALID_PARAMS, "Missing 'name' in params")
        if not isinstance(name, str):
            raise RequestError(INVALID_PARAMS, f"Invalid params: 'name' must be a string, got {name!r}")
        arguments = params.get("arguments")
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise RequestError(INVALID_PARAMS, "Invalid params: 'arguments' must be an object of named "
                               "arguments")
        self._check_supported(peer)
        session, one_shot = await self._target(peer, params)
        try:
            is_tool_env = isinstance(session.env, ToolEnvironment)
            if not is_tool_env and not self._step_kind:
                raise RequestError(INTERNAL_ERROR, _NOT_MCP)
            try:
                outcome = await self.sessions.step_outcome(
                    session, {"type": "call_tool", "tool_name": name, "arguments": arguments}, tool=True)
            except ValidationError as exc:
                raise RequestError(INVALID_PARAMS, f"Invalid params: {_summary(exc.errors)}",
                                   data={"errors": exc.errors}) from None
            obs = outcome.applied()
            if not isinstance(obs, CallToolObservation):
                raise RequestError(INTERNAL_ERROR, f"MCP-style tools/call step returned {type(obs).__name__}, "
                                   "expected CallToolObservation")
            if not is_tool_env:  # kind B: upstream returns the observation itself
                return result(req.id, obs.model_dump(mode="json"))
            return self._render_call(peer, req, obs, outcome)
        finally:
            if one_shot:
                await self.sessions.close(session, "one-shot MCP request")

    def _render_call(self, peer: Peer, req: Request, obs: CallToolObservation, outcome: StepOutcome) -> dict[str, Any]:
        tool_error = obs.error
        if peer.mcp:
            meta: dict[str, Any] = {}
            if obs.reward is not None or obs.done:
                meta = {"openenv/reward": obs.reward, "openenv/done": obs.done}
            if outcome.components is not None:
                # A server rubric scored this call (docs/protocol.md §2.7). ``_meta`` is MCP's own
                # extension slot, which every MCP client passes through untouched, so the components
                # go to every MCP peer without the opt-in header; the OpenEnv dialect below is upstream's
                # shape and never carries them.
                meta["openenv/reward"], meta["openenv/done"] = outcome.reward, obs.done
                meta["openenv/reward_components"] = outcome.components
                if outcome.details is not None:
                    meta["openenv/reward_details"] = outcome.details
            if tool_error is not None:
                meta["openenv/error_type"] = str(tool_error.error_type)
                return result(req.id, {"content": [{"type": "text", "text": tool_error.message}],
                                       "isError": True, "_meta": meta})
            body: dict[str, Any] = {"content": obs.result["content"], "isError": False}
            if obs.result.get("structured_content") is not None:
                body["structuredContent"] = obs.result["structured_content"]
            if meta:
                body["_meta"] = meta
            return result(req.id, body)
        if tool_error is not None:
            # Upstream's client raises on a JSON-RPC error; data tells where the call failed (B7).
            return error(req.id, INTERNAL_ERROR, tool_error.message, {"error_type": str(tool_error.error_type)})
        body = dict(obs.result)
        body["structuredContent"] = body.get("structured_content")
        body["isError"] = bool(body.get("is_error"))
        return result(req.id, body)

    async def _session_create(self, peer: Peer) -> dict[str, Any]:
        if peer.session is not None:  # a WebSocket (or MCP session) already has its own
            return {"session_id": peer.session.id}
        session = await self.open_session(peer, "mcp")
        return {"session_id": session.id}

    async def _session_close(self, peer: Peer, params: dict[str, Any]) -> dict[str, Any]:
        sid = params.get("session_id")
        if not sid:
            raise RequestError(INVALID_PARAMS, "Invalid params - 'session_id' is required")
        if peer.session is not None and sid == peer.session.id:
            if peer.carrier == "mcp-http":
                raise RequestError(INVALID_REQUEST, "Cannot close the session bound to this MCP session via "
                                   "MCP method; end the MCP session instead (HTTP DELETE /mcp)")
            raise RequestError(INVALID_REQUEST, "Cannot close active WebSocket-managed session via MCP method")
        session = self.lookup(sid, peer.principal)
        closed = await self.sessions.request_close(session, "closed by openenv/session/close")
        if closed:
            return {"session_id": sid, "closed": True}
        return {"session_id": sid, "closed": False, "closing": True}

    # -- sessions -------------------------------------------------------------------------------

    def _check_supported(self, peer: Peer) -> None:
        """Kind D (docs/protocol.md §4.5) is known from the class alone when the env class is known."""
        if peer.session is not None or self._class_is_tool_env or self._step_kind:
            return
        if self.ctx.env_class is not None:
            raise RequestError(INTERNAL_ERROR, _NOT_MCP)

    async def _target(self, peer: Peer, params: dict[str, Any]) -> tuple[Session, bool]:
        """The session a tools/* call runs against, and whether it is a one-shot session."""
        if peer.session is not None:
            if peer.session.closed:
                raise RequestError(INTERNAL_ERROR, "Session environment not initialized")
            return peer.session, False
        sid = params.get("session_id")
        if sid is not None:
            return self.lookup(sid, peer.principal), False
        # A session-less call gets a transient env that counts against capacity (docs/protocol.md §11 B1).
        return await self.open_session(peer, "mcp-oneshot", one_shot=True), True

    def lookup(self, sid: Any, principal: str | None) -> Session:
        if not isinstance(sid, str):
            raise RequestError(INVALID_PARAMS, f"Unknown session_id: {sid}")
        try:
            session = self.sessions.get(sid)
        except SessionError:
            pending = next((s for s in self.sessions.sessions() if s.id == sid), None)
            if (pending is not None and not pending.ready and not pending.closed
                    and owns(pending, principal)):  # another principal learns nothing (B16)
                raise RequestError(INVALID_REQUEST, f"Session {sid} is still initializing; retry shortly") from None
            raise RequestError(INVALID_PARAMS, f"Unknown session_id: {sid}") from None
        if not owns(session, principal):  # another principal's session: reveal nothing (B16)
            raise RequestError(INVALID_PARAMS, f"Unknown session_id: {sid}")
        return session

    async def open_session(self, peer: Peer, transport: str, *, attach: bool = False,
                           one_shot: bool = False) -> Session:
        """Open a session for ``peer``; capacity and factory failures as ``-32000`` errors whose
        ``data.code`` is the OpenEnv code (``CAPACITY_REACHED``, ``FACTORY_ERROR``)."""
        try:
            return await self.sessions.open(owner=peer.principal, transport=transport, attach=attach,
                                            one_shot=one_shot)
        except CapacityError as exc:
            raise RequestError(SERVER_ERROR, exc.message, data={
                "code": exc.code, "active_sessions": exc.active_sessions, "max_sessions": exc.max_sessions,
            }) from None
        except FactoryError as exc:
            raise RequestError(SERVER_ERROR, exc.message, data={
                "code": exc.code, "factory_name": exc.factory_name}) from None


def _error_data(exc: OpenEnvError) -> dict[str, Any]:
    """An OpenEnv error's wire data minus its message (already the JSON-RPC ``message``)."""
    data = dict(exc.to_wire())
    data.pop("message", None)
    return data


def _summary(errors: list[dict[str, Any]]) -> str:
    parts = []
    for err in errors:
        loc = ".".join(str(p) for p in err.get("loc", ())) or "(params)"
        parts.append(f"{loc}: {err.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid"
