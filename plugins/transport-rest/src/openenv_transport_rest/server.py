"""Server side of the HTTP transport: real sessions plus upstream's one-shot control routes.

Routes (docs/protocol.md §5, §6.1, §11 B1, B16):

* ``POST /sessions`` → 201 ``{"session_id"}``; ``GET`` / ``DELETE /sessions/{id}``.
* ``POST /reset``, ``POST /step``, ``GET /state``. With the request header ``OpenEnv-Session-Id``
  they act on that session, so ``/step`` continues the ``/reset`` episode. Without it they keep
  upstream's one-shot behaviour: a transient env is built for the request and closed after it,
  counted against capacity, and the reply carries ``OpenEnv-Session: none``. What each mode allows
  is the session manager's rule, the same on every transport (``openenv.modes``): production
  refuses the one-shot form (404, ``code`` ``MODE_ERROR``; upstream has no such routes there).
  Body keys beside ``action`` are step keyword arguments, checked by the manager's one
  step-kwargs rule (an unknown key is a 422; upstream's ``timeout_s``/``request_id`` are dropped
  when ``step`` does not take them).
* ``GET /openapi.json`` and ``GET /docs`` describe exactly these routes.

Promises: bodies and status codes are upstream's (422 ``{"detail": [...]}`` with ``loc`` starting
at ``"body"`` for body errors and relative to the action for action errors); every other error is
JSON ``{"detail", "code", ...}``, never ``text/plain`` (upstream answers an env exception with a
plain-text 500; we keep the status and say what happened). With token auth the principal is
``ServerContext.principal`` (a digest of the presented token, the same on every transport), and a
session owned by another principal is reported as unknown.

Lean per-request path: every route is a raw ASGI endpoint (``asgi.Endpoint``) behind a Starlette
``Route`` (which still matches the path and answers a wrong method with the kernel's JSON 405).
A request costs one header scan, one bounded body read, one ``orjson`` parse, hand-written
envelope checks (``envelope``), the session manager's call (which validates the action and runs
the env where the kernel decides) and one encode; no request/response objects, no Pydantic model
for the envelope. The hot routes come first in ``routes()`` so the router reaches them sooner.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

from starlette.routing import BaseRoute, Route

from openenv import wire
from openenv.context import ServerContext
from openenv.errors import CapacityError, ModeError, OpenEnvError, SessionError, SnapshotError, ValidationError
from openenv.interfaces import ServerTransport
from openenv.sessions import ResetRequiredError, Session
from openenv.types import StepOutcome, components_wanted
from openenv_transport_rest.asgi import (
    JSON,
    Endpoint,
    Headers,
    Receive,
    Reply,
    ReplyTuple,
    Scope,
    ScopeHeaders,
    first_header,
    json_reply,
    raw_reply,
    read_body,
)
from openenv_transport_rest.envelope import MISSING_BODY, parse_json, reset_data, step_parts
from openenv_transport_rest.models import ONE_SHOT_HEADER, SESSION_HEADER
from openenv_transport_rest.openapi import build_openapi, docs_page

__all__ = ["RestTransport"]

_SESSION_KEY = SESSION_HEADER.lower().encode("latin-1")
_ONE_SHOT_KEY = ONE_SHOT_HEADER.lower().encode("latin-1")
_CONTENT_LENGTH = b"content-length"
_HTML = b"text/html; charset=utf-8"
_JSON_TYPE = (b"content-type", JSON)
_dumps = wire.dumps_bytes
#: Step keyword arguments travel as body keys beside ``action``: errors are located in the body.
_BODY_LOC = ("body",)


def _session_headers(session_id: bytes) -> Headers:
    """A new header list for a session-bound reply (``_serialized`` appends to it)."""
    return [(_SESSION_KEY, session_id)]


def _one_shot_headers() -> Headers:
    """A new header list for a one-shot reply (``_serialized`` appends to it)."""
    return [(_ONE_SHOT_KEY, b"none")]


def _unknown(session_id: str) -> Reply:
    return Reply(*json_reply({"detail": f"Unknown session_id: {session_id}"}, 404))


def _status(exc: OpenEnvError) -> int:
    """The HTTP status of an OpenEnv error (the body's ``code`` is the same code /ws and MCP send)."""
    if isinstance(exc, CapacityError):
        return 503
    if isinstance(exc, ModeError):
        return 404  # not offered in this mode (upstream answers 404: the routes are absent there)
    if isinstance(exc, ResetRequiredError):
        return 409  # the session's state, not the server, is at fault: reset first
    if isinstance(exc, SnapshotError):  # the request's fault, by rule (docs/protocol.md §12)
        return {"unsupported": 501, "not_started": 409, "episode_rubric": 409}.get(exc.reason or "", 422)
    return 500


def _error(exc: OpenEnvError, headers: Headers | None = None) -> Reply:
    """An OpenEnv error as an HTTP reply: 422 for validation, else ``_status``."""
    if isinstance(exc, ValidationError):
        return Reply(*json_reply({"detail": exc.errors}, 422, headers))
    data = dict(exc.to_wire())
    body: dict[str, Any] = {"detail": data.pop("message", exc.message), "code": data.pop("code", exc.code)}
    if "detail" in data:  # e.g. the factory's exception text; "detail" is taken by the message
        body["reason"] = data.pop("detail")
    body.update(data)
    return Reply(*json_reply(body, _status(exc), headers))


class RestTransport(ServerTransport):
    """HTTP transport: explicit sessions, session-bound or one-shot control routes, OpenAPI."""

    name = "rest"

    def __init__(self, ctx: ServerContext) -> None:
        super().__init__(ctx)
        self._openapi: bytes | None = None
        self._docs: bytes | None = None
        self._limit: int = ctx.config.max_message_bytes
        self._sessions = ctx.sessions

    # -- ServerTransport --------------------------------------------------------------------------

    def routes(self) -> list[BaseRoute]:
        routes: list[BaseRoute] = []
        # The per-step routes first: Starlette's router tries routes in order, and the paths are
        # disjoint, so the order changes nothing but how soon a step is matched.
        # Every mode mounts them: the session manager's mode rule decides what each request may do
        # (production refuses the session-less one-shot form with a 404 MODE_ERROR, as upstream
        # has no such routes there), exactly as on every other transport.
        routes += [
            Route("/step", Endpoint(self.step), methods=["POST"], name="step"),
            Route("/reset", Endpoint(self.reset), methods=["POST"], name="reset"),
            Route("/state", Endpoint(self.state), methods=["GET"], name="state"),
            Route("/sessions", Endpoint(self.create_session), methods=["POST"], name="create_session"),
            Route("/sessions/{session_id}", Endpoint(self.session_resource), methods=["GET", "DELETE"],
                  name="session_resource"),
            Route("/sessions/{session_id}/snapshot", Endpoint(self.snapshot), methods=["POST"], name="snapshot"),
            Route("/sessions/{session_id}/restore", Endpoint(self.restore), methods=["POST"], name="restore"),
            Route("/openapi.json", Endpoint(self.openapi), methods=["GET"], name="openapi"),
            Route("/docs", Endpoint(self.docs), methods=["GET"], name="docs"),
        ]
        return routes

    def capabilities(self) -> dict[str, Any]:
        return {
            "extensions": ["http-sessions"],
            "rest": {
                "session_header": SESSION_HEADER,
                "sessions_path": "/sessions",
                "control_routes": True,
                "one_shot_control_routes": self.ctx.mode == "simulation",
                "idle_timeout_s": self._sessions.idle_timeout_s,
            },
        }

    # -- sessions ---------------------------------------------------------------------------------

    async def create_session(self, scope: Scope, receive: Receive) -> ReplyTuple:
        """``POST /sessions``: open a session owned by the caller; 201 ``{"session_id"}``."""
        try:
            session = await self._sessions.open(owner=self.ctx.principal(ScopeHeaders(scope)), transport="http")
        except OpenEnvError as exc:
            raise _error(exc) from None
        return json_reply({"session_id": session.id}, 201, _session_headers(session.id.encode("latin-1")))

    async def session_resource(self, scope: Scope, receive: Receive) -> ReplyTuple:
        """``GET /sessions/{id}`` → info; ``DELETE`` → close now, or at detach if a WebSocket is on it."""
        session_id: str = scope["path_params"]["session_id"]
        session = self._lookup(scope, session_id)
        if scope["method"] == "DELETE":
            if await self._sessions.request_close(session, "closed over HTTP"):
                return json_reply({"session_id": session_id, "closed": True})
            return json_reply({"session_id": session_id, "closed": False, "closing": True})
        # Reading the info is an observer's act: it does not count as activity, so a monitor
        # polling it cannot keep an abandoned session alive.
        info = session.info()
        info["idle_timeout_s"] = self._sessions.idle_timeout_s
        return json_reply(info)

    async def snapshot(self, scope: Scope, receive: Receive) -> ReplyTuple:
        """``POST /sessions/{id}/snapshot``: the session's live episode, sealed (openenv.snapshots)."""
        session_id: str = scope["path_params"]["session_id"]
        session = self._lookup(scope, session_id)
        try:
            snap = await self._sessions.snapshot(session)
        except SessionError:
            raise _unknown(session_id) from None
        except OpenEnvError as exc:
            raise _error(exc) from None
        return self._serialized(snap, _session_headers(session_id.encode("latin-1")))

    async def restore(self, scope: Scope, receive: Receive) -> ReplyTuple:
        """``POST /sessions/{id}/restore`` with a snapshot as the body: the session continues that
        episode; the reply is its observation, as after a reset."""
        session_id: str = scope["path_params"]["session_id"]
        session = self._lookup(scope, session_id)
        _, declared = _control_headers(scope)
        body = parse_json(await read_body(receive, declared, self._limit))
        if body is None:
            raise Reply(*json_reply(MISSING_BODY, 422))
        try:
            outcome = await self._sessions.restore(session, body)
        except SessionError:
            raise _unknown(session_id) from None
        except OpenEnvError as exc:
            raise _error(exc) from None
        return self._observation(scope, outcome, _session_headers(session_id.encode("latin-1")))

    # -- control routes ---------------------------------------------------------------------------

    async def reset(self, scope: Scope, receive: Receive) -> ReplyTuple:
        """``POST /reset``: body optional; keys filtered by the env's ``reset`` signature."""
        raw_id, declared = _control_headers(scope)
        data = reset_data(parse_json(await read_body(receive, declared, self._limit)))
        if raw_id is not None:
            session_id = raw_id.decode("latin-1")
            session = self._lookup(scope, session_id)
            try:
                outcome = await self._sessions.reset_outcome(session, data)
            except SessionError:  # the session was closed (DELETE, reaper) while this waited
                raise _unknown(session_id) from None
            except OpenEnvError as exc:
                raise _error(exc) from None
            return self._observation(scope, outcome, _session_headers(raw_id))
        async with self._one_shot(scope, "reset") as session:
            outcome = await self._run(self._sessions.reset_outcome(session, data))
        return self._observation(scope, outcome, _one_shot_headers())

    async def step(self, scope: Scope, receive: Receive) -> ReplyTuple:
        """``POST /step``: ``{"action": {...}, "timeout_s"?, "request_id"?, ...extra}``."""
        raw_id, declared = _control_headers(scope)
        data = parse_json(await read_body(receive, declared, self._limit))
        if data is None:  # FastAPI reports a missing required body as one "missing" error
            raise Reply(*json_reply(MISSING_BODY, 422))
        action, extra = step_parts(data)
        if raw_id is None:
            return await self._one_shot_step(scope, action, extra)
        session_id = raw_id.decode("latin-1")
        session = self._lookup(scope, session_id)
        try:
            outcome = await self._sessions.step_outcome(session, action, extra, _BODY_LOC)
        except SessionError:  # the session was closed (DELETE, reaper) while this waited
            raise _unknown(session_id) from None
        except OpenEnvError as exc:
            raise _error(exc) from None
        return self._observation(scope, outcome, _session_headers(raw_id))

    async def _one_shot_step(self, scope: Scope, action: dict[str, Any], extra: dict[str, Any]) -> ReplyTuple:
        # Upstream validates the action before building an env; an invalid request costs no env.
        try:
            self._sessions.check_mode(None, "step")
            self._sessions.validate_action(action)
            kwargs = self._sessions.step_kwargs(extra, _BODY_LOC)
        except OpenEnvError as exc:
            raise _error(exc, _one_shot_headers()) from None
        async with self._one_shot(scope, "step") as session:
            outcome = await self._run(self._sessions.step_outcome(session, action, kwargs, _BODY_LOC))
        return self._observation(scope, outcome, _one_shot_headers())

    async def state(self, scope: Scope, receive: Receive) -> ReplyTuple:
        """``GET /state``: the session's state, or a fresh transient env's state (upstream)."""
        raw_id = first_header(scope, _SESSION_KEY)
        if raw_id is not None:
            session_id = raw_id.decode("latin-1")
            session = self._lookup(scope, session_id)
            try:
                state = await self._sessions.state(session)
            except SessionError:
                raise _unknown(session_id) from None
            except OpenEnvError as exc:
                raise _error(exc) from None
            return self._serialized(state, _session_headers(raw_id))
        async with self._one_shot(scope, "state") as session:
            state = await self._run(self._sessions.state(session))
        return self._serialized(state, _one_shot_headers())

    # -- documentation ----------------------------------------------------------------------------

    async def openapi(self, scope: Scope, receive: Receive) -> ReplyTuple:
        """``GET /openapi.json``: an OpenAPI 3.1 document describing this server's HTTP routes."""
        if self._openapi is None:
            self._openapi = wire.dumps_bytes(build_openapi(self.ctx))
        return raw_reply(self._openapi)

    async def docs(self, scope: Scope, receive: Receive) -> ReplyTuple:
        """``GET /docs``: a self-contained HTML page (no CDN assets) listing the routes."""
        if self._docs is None:
            self._docs = docs_page(build_openapi(self.ctx)).encode("utf-8")
        return raw_reply(self._docs, media_type=_HTML)

    # -- helpers ----------------------------------------------------------------------------------

    def _lookup(self, scope: Scope, session_id: str) -> Session:
        """The caller's session, or a 404 reply that reveals nothing about other principals'."""
        try:
            session: Session = self._sessions.get(session_id)
        except SessionError as exc:
            if "initializing" in exc.message and self._sessions.visible_to(
                    session_id, self.ctx.principal(ScopeHeaders(scope))):
                raise Reply(*json_reply({"detail": f"{exc.message}; retry shortly", "code": "SESSION_ERROR"},
                                        409)) from None
            raise _unknown(session_id) from None
        owner = session.owner
        if owner is not None:  # an unowned session is anyone's: no need to work out the caller
            principal = self.ctx.principal(ScopeHeaders(scope))
            if principal is not None and owner != principal:
                raise _unknown(session_id)
        return session

    @contextlib.asynccontextmanager
    async def _one_shot(self, scope: Scope, operation: str) -> AsyncIterator[Session]:
        """A transient session for one legacy request: counted against capacity, always closed.

        The mode rule is asked first, so a request the mode refuses builds no env.
        """
        try:
            self._sessions.check_mode(None, operation)
            session: Session = await self._sessions.open(owner=self.ctx.principal(ScopeHeaders(scope)),
                                                         transport="http-oneshot", one_shot=True)
        except OpenEnvError as exc:
            raise _error(exc, _one_shot_headers()) from None
        try:
            yield session
        except Reply as reply:
            reply.set_header(_ONE_SHOT_KEY, b"none")
            raise
        finally:
            await self._sessions.close(session, "one-shot request done")

    async def _run(self, operation: Any) -> Any:
        """Await a one-shot session's operation, turning OpenEnv errors into replies."""
        try:
            return await operation
        except OpenEnvError as exc:
            raise _error(exc) from None

    def _observation(self, scope: Scope, outcome: StepOutcome, headers: Headers) -> ReplyTuple:
        try:
            # A server rubric's components go only to a caller that asked (docs/protocol.md §2.7).
            wanted = outcome.components is not None and components_wanted(scope.get("headers", ()))
            payload = outcome.http_payload(wanted)
        except Exception as exc:  # e.g. "Non-finite reward: nan" (docs/protocol.md §11 B6)
            return json_reply({"detail": str(exc), "code": "EXECUTION_ERROR"}, 500, headers)
        return self._serialized(payload, headers)

    def _serialized(self, body: Any, headers: Headers) -> ReplyTuple:
        try:
            content = _dumps(body)
        except Exception as exc:
            return json_reply({"detail": f"Could not serialize the reply: {exc}", "code": "EXECUTION_ERROR"},
                              500, headers)
        headers.append((_CONTENT_LENGTH, b"%d" % len(content)))
        headers.append(_JSON_TYPE)
        return 200, headers, content

def _control_headers(scope: Scope) -> tuple[bytes | None, bytes | None]:
    """The first ``OpenEnv-Session-Id`` and ``Content-Length`` values (raw bytes), in one scan."""
    session_id = declared = None
    for key, value in scope["headers"]:
        if key == _SESSION_KEY:
            if session_id is None:
                session_id = value
        elif key == _CONTENT_LENGTH and declared is None:
            declared = value
    return session_id, declared
