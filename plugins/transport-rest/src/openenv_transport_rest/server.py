"""Server side of the HTTP transport: real sessions plus upstream's one-shot control routes.

Routes (docs/protocol.md §5, §6.1, §11 B1, B16):

* ``POST /sessions`` → 201 ``{"session_id"}``; ``GET`` / ``DELETE /sessions/{id}``.
* ``POST /reset``, ``POST /step``, ``GET /state`` (simulation mode only). With the request header
  ``OpenEnv-Session-Id`` they act on that session, so ``/step`` continues the ``/reset`` episode.
  Without it they keep upstream's one-shot behaviour: a transient env is built for the request and
  closed after it, counted against capacity, and the reply carries ``OpenEnv-Session: none``.
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
import inspect
from collections.abc import AsyncIterator
from typing import Any

from starlette.routing import BaseRoute, Route

from openenv import wire
from openenv.errors import CapacityError, OpenEnvError, SessionError, ValidationError
from openenv.interfaces import ServerTransport
from openenv.sessions import Session
from openenv.types import Observation, http_observation_payload
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


def _session_headers(session_id: bytes) -> Headers:
    """A new header list for a session-bound reply (``_serialized`` appends to it)."""
    return [(_SESSION_KEY, session_id)]


def _one_shot_headers() -> Headers:
    """A new header list for a one-shot reply (``_serialized`` appends to it)."""
    return [(_ONE_SHOT_KEY, b"none")]


def _unknown(session_id: str) -> Reply:
    return Reply(*json_reply({"detail": f"Unknown session_id: {session_id}"}, 404))


def _error(exc: OpenEnvError, headers: Headers | None = None) -> Reply:
    """An OpenEnv error as an HTTP reply: 422 for validation, 503 for capacity, else 500."""
    if isinstance(exc, ValidationError):
        return Reply(*json_reply({"detail": exc.errors}, 422, headers))
    data = dict(exc.to_wire())
    body: dict[str, Any] = {"detail": data.pop("message", exc.message), "code": data.pop("code", exc.code)}
    if "detail" in data:  # e.g. the factory's exception text; "detail" is taken by the message
        body["reason"] = data.pop("detail")
    body.update(data)
    return Reply(*json_reply(body, 503 if isinstance(exc, CapacityError) else 500, headers))


class RestTransport(ServerTransport):
    """HTTP transport: explicit sessions, session-bound or one-shot control routes, OpenAPI."""

    name = "rest"

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self._step_signatures: dict[type, tuple[frozenset[str], bool]] = {}
        self._openapi: bytes | None = None
        self._docs: bytes | None = None
        self._limit: int = ctx.config.max_message_bytes
        self._sessions = ctx.sessions

    # -- ServerTransport --------------------------------------------------------------------------

    def routes(self) -> list[BaseRoute]:
        routes: list[BaseRoute] = []
        # The per-step routes first: Starlette's router tries routes in order, and the paths are
        # disjoint, so the order changes nothing but how soon a step is matched.
        # Production mode removes the control routes entirely (upstream: 404 {"detail":"Not Found"}).
        if self.ctx.mode == "simulation":
            routes += [
                Route("/step", Endpoint(self.step), methods=["POST"], name="step"),
                Route("/reset", Endpoint(self.reset), methods=["POST"], name="reset"),
                Route("/state", Endpoint(self.state), methods=["GET"], name="state"),
            ]
        routes += [
            Route("/sessions", Endpoint(self.create_session), methods=["POST"], name="create_session"),
            Route("/sessions/{session_id}", Endpoint(self.session_resource), methods=["GET", "DELETE"],
                  name="session_resource"),
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
                "control_routes": self.ctx.mode == "simulation",
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

    # -- control routes ---------------------------------------------------------------------------

    async def reset(self, scope: Scope, receive: Receive) -> ReplyTuple:
        """``POST /reset``: body optional; keys filtered by the env's ``reset`` signature."""
        raw_id, declared = _control_headers(scope)
        data = reset_data(parse_json(await read_body(receive, declared, self._limit)))
        if raw_id is not None:
            session_id = raw_id.decode("latin-1")
            session = self._lookup(scope, session_id)
            try:
                obs = await self._sessions.reset(session, data)
            except SessionError:  # the session was closed (DELETE, reaper) while this waited
                raise _unknown(session_id) from None
            except OpenEnvError as exc:
                raise _error(exc) from None
            return self._observation(obs, _session_headers(raw_id))
        async with self._one_shot(scope) as session:
            obs = await self._run(self._sessions.reset(session, data))
        return self._observation(obs, _one_shot_headers())

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
            obs = await self._sessions.step(session, action, self._step_kwargs(session, extra) if extra else extra)
        except SessionError:  # the session was closed (DELETE, reaper) while this waited
            raise _unknown(session_id) from None
        except OpenEnvError as exc:
            raise _error(exc) from None
        return self._observation(obs, _session_headers(raw_id))

    async def _one_shot_step(self, scope: Scope, action: dict[str, Any], extra: dict[str, Any]) -> ReplyTuple:
        # Upstream validates the action before building an env; an invalid action costs no env.
        try:
            self._sessions.validate_action(action)
        except ValidationError as exc:
            raise _error(exc, _one_shot_headers()) from None
        async with self._one_shot(scope) as session:
            kwargs = self._step_kwargs(session, extra)
            obs = await self._run(self._sessions.step(session, action, kwargs))
        return self._observation(obs, _one_shot_headers())

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
        async with self._one_shot(scope) as session:
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
            if "initializing" in exc.message:
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
    async def _one_shot(self, scope: Scope) -> AsyncIterator[Session]:
        """A transient session for one legacy request: counted against capacity, always closed."""
        try:
            session: Session = await self._sessions.open(owner=self.ctx.principal(ScopeHeaders(scope)),
                                                            transport="http-oneshot")
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

    def _step_kwargs(self, session: Session, extra: dict[str, Any]) -> dict[str, Any]:
        """Keep the step keyword arguments the env's ``step`` accepts (upstream filters silently)."""
        env = session.env
        if not extra or env is None:
            return extra
        params, var_kw = self._step_signature(env)
        if var_kw:
            return extra
        return {k: v for k, v in extra.items() if k in params}

    def _step_signature(self, env: Any) -> tuple[frozenset[str], bool]:
        cls = type(env)
        cached = self._step_signatures.get(cls)
        if cached is None:
            method = env.step_async if self._sessions.is_async else env.step
            try:
                params = list(inspect.signature(method).parameters.values())
            except (TypeError, ValueError):
                cached = (frozenset(), True)
            else:
                # The first parameter receives the action; a body key of that name must not.
                named = [p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
                if named and named[0].kind is named[0].POSITIONAL_OR_KEYWORD:
                    named = named[1:]
                cached = (frozenset(p.name for p in named), any(p.kind is p.VAR_KEYWORD for p in params))
            self._step_signatures[cls] = cached
        return cached

    def _observation(self, obs: Observation, headers: Headers) -> ReplyTuple:
        try:
            payload = http_observation_payload(obs)
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
