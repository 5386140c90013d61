"""Server side of the HTTP transport: real sessions plus upstream's one-shot control routes.

Routes (spec §5, §6.1, §11 B1, B16):

* ``POST /sessions`` → 201 ``{"session_id"}``; ``GET`` / ``DELETE /sessions/{id}``.
* ``POST /reset``, ``POST /step``, ``GET /state`` (simulation mode only). With the request header
  ``OpenEnv-Session-Id`` they act on that session, so ``/step`` continues the ``/reset`` episode.
  Without it they keep upstream's one-shot behaviour: a transient env is built for the request and
  closed after it, counted against capacity, and the reply carries ``OpenEnv-Session: none``.
* ``GET /openapi.json`` and ``GET /docs`` describe exactly these routes.

Promises: bodies and status codes are upstream's (422 ``{"detail": [...]}`` with ``loc`` starting
at ``"body"`` for body errors and relative to the action for action errors); every other error is
JSON ``{"detail", "code", ...}``, never ``text/plain`` (upstream answers an env exception with a
plain-text 500; we keep the status and say what happened). Each body is parsed once. With token
auth the principal is ``ServerContext.principal`` (a digest of the presented token, the same on
every transport), and a session owned by another principal is reported as unknown.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Route

from openenv import wire
from openenv.errors import CapacityError, OpenEnvError, SessionError, ValidationError
from openenv.interfaces import ServerTransport
from openenv.sessions import Session
from openenv.types import Observation, http_observation_payload
from openenv_transport_rest.models import ONE_SHOT_HEADER, SESSION_HEADER, ResetRequest, StepRequest
from openenv_transport_rest.openapi import build_openapi, docs_page

__all__ = ["RestTransport"]

log = logging.getLogger("openenv.transport.rest")

_JSON = "application/json"
_ONE_SHOT = {ONE_SHOT_HEADER: "none"}

ModelT = TypeVar("ModelT", bound=BaseModel)
Endpoint = Callable[[Request], Awaitable[Response]]


class _Reply(Exception):
    """Raised inside a handler to answer at once with ``response`` (keeps handlers linear)."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status_code)
        self.response = response


def _json(body: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(wire.dumps_bytes(body), status_code=status, headers=headers, media_type=_JSON)


def _unknown(session_id: str) -> Response:
    return _json({"detail": f"Unknown session_id: {session_id}"}, 404)


def _error(exc: OpenEnvError, headers: dict[str, str] | None = None) -> Response:
    """An OpenEnv error as an HTTP reply: 422 for validation, 503 for capacity, else 500."""
    if isinstance(exc, ValidationError):
        return _json({"detail": exc.errors}, 422, headers)
    data = dict(exc.to_wire())
    body: dict[str, Any] = {"detail": data.pop("message", exc.message), "code": data.pop("code", exc.code)}
    if "detail" in data:  # e.g. the factory's exception text; "detail" is taken by the message
        body["reason"] = data.pop("detail")
    body.update(data)
    return _json(body, 503 if isinstance(exc, CapacityError) else 500, headers)


def _body_errors(exc: PydanticValidationError) -> list[dict[str, Any]]:
    # FastAPI (upstream) reports body errors under "body" and without Pydantic's doc URLs.
    errors = wire.validation_errors(exc, ("body",))
    for err in errors:
        err.pop("url", None)
    return errors


def _validate(model: type[ModelT], data: Any) -> ModelT:
    try:
        return model.model_validate(data)
    except PydanticValidationError as exc:
        raise _Reply(_json({"detail": _body_errors(exc)}, 422)) from None


def _guarded(handler: Endpoint) -> Endpoint:
    """Wrap a handler: ``_Reply`` answers as given; anything unexpected is a JSON 500."""

    async def endpoint(request: Request) -> Response:
        try:
            return await handler(request)
        except _Reply as reply:
            return reply.response
        except Exception as exc:
            log.exception("%s %s failed", request.method, request.url.path)
            return _json({"detail": str(exc) or type(exc).__name__, "code": "EXECUTION_ERROR"}, 500)

    endpoint.__name__ = handler.__name__
    return endpoint


class RestTransport(ServerTransport):
    """HTTP transport: explicit sessions, session-bound or one-shot control routes, OpenAPI."""

    name = "rest"

    def __init__(self, ctx: Any) -> None:
        super().__init__(ctx)
        self._step_signatures: dict[type, tuple[frozenset[str], bool]] = {}
        self._openapi: bytes | None = None
        self._docs: str | None = None

    # -- ServerTransport --------------------------------------------------------------------------

    def routes(self) -> list[BaseRoute]:
        routes: list[BaseRoute] = [
            Route("/sessions", _guarded(self.create_session), methods=["POST"]),
            Route("/sessions/{session_id}", _guarded(self.session_resource), methods=["GET", "DELETE"]),
            Route("/openapi.json", self.openapi, methods=["GET"]),
            Route("/docs", self.docs, methods=["GET"]),
        ]
        # Production mode removes the control routes entirely (upstream: 404 {"detail":"Not Found"}).
        if self.ctx.mode == "simulation":
            routes += [
                Route("/reset", _guarded(self.reset), methods=["POST"]),
                Route("/step", _guarded(self.step), methods=["POST"]),
                Route("/state", _guarded(self.state), methods=["GET"]),
            ]
        return routes

    def capabilities(self) -> dict[str, Any]:
        return {
            "extensions": ["http-sessions"],
            "rest": {
                "session_header": SESSION_HEADER,
                "sessions_path": "/sessions",
                "control_routes": self.ctx.mode == "simulation",
                "idle_timeout_s": self.ctx.sessions.idle_timeout_s,
            },
        }

    # -- sessions ---------------------------------------------------------------------------------

    async def create_session(self, request: Request) -> Response:
        """``POST /sessions``: open a session owned by the caller; 201 ``{"session_id"}``."""
        try:
            session = await self.ctx.sessions.open(owner=self.ctx.principal(request.headers), transport="http")
        except OpenEnvError as exc:
            return _error(exc)
        return _json({"session_id": session.id}, 201, {SESSION_HEADER: session.id})

    async def session_resource(self, request: Request) -> Response:
        """``GET /sessions/{id}`` → info; ``DELETE`` → close now, or at detach if a WebSocket is on it."""
        session_id = request.path_params["session_id"]
        session = self._lookup(request, session_id)
        if request.method == "DELETE":
            if await self.ctx.sessions.request_close(session, "closed over HTTP"):
                return _json({"session_id": session_id, "closed": True})
            return _json({"session_id": session_id, "closed": False, "closing": True})
        # Reading the info is an observer's act: it does not count as activity, so a monitor
        # polling it cannot keep an abandoned session alive.
        info = session.info()
        info["idle_timeout_s"] = self.ctx.sessions.idle_timeout_s
        return _json(info)

    # -- control routes ---------------------------------------------------------------------------

    async def reset(self, request: Request) -> Response:
        """``POST /reset``: body optional; keys filtered by the env's ``reset`` signature."""
        raw = await self._read_body(request)
        body = _validate(ResetRequest, {} if raw is None else raw)
        data = body.model_dump(exclude_unset=True)
        session_id = request.headers.get(SESSION_HEADER)
        if session_id is not None:
            session = self._lookup(request, session_id)
            obs = await self._run(self.ctx.sessions.reset(session, data), session_id)
            return self._observation(obs, {SESSION_HEADER: session_id})
        async with self._one_shot(request) as session:
            obs = await self._run(self.ctx.sessions.reset(session, data))
        return self._observation(obs, _ONE_SHOT)

    async def step(self, request: Request) -> Response:
        """``POST /step``: ``{"action": {...}, "timeout_s"?, "request_id"?, ...extra}``."""
        raw = await self._read_body(request)
        if raw is None:  # FastAPI reports a missing required body as one "missing" error
            raise _Reply(_json({"detail": [{"type": "missing", "loc": ["body"], "msg": "Field required",
                                            "input": None}]}, 422))
        body = _validate(StepRequest, raw)
        extra = body.model_dump(exclude_unset=True, exclude={"action"})
        session_id = request.headers.get(SESSION_HEADER)
        if session_id is not None:
            session = self._lookup(request, session_id)
            kwargs = self._step_kwargs(session, extra)
            obs = await self._run(self.ctx.sessions.step(session, body.action, kwargs), session_id)
            return self._observation(obs, {SESSION_HEADER: session_id})
        # Upstream validates the action before building an env; an invalid action costs no env.
        try:
            self.ctx.sessions.validate_action(body.action)
        except ValidationError as exc:
            raise _Reply(_error(exc, _ONE_SHOT)) from None
        async with self._one_shot(request) as session:
            kwargs = self._step_kwargs(session, extra)
            obs = await self._run(self.ctx.sessions.step(session, body.action, kwargs))
        return self._observation(obs, _ONE_SHOT)

    async def state(self, request: Request) -> Response:
        """``GET /state``: the session's state, or a fresh transient env's state (upstream)."""
        session_id = request.headers.get(SESSION_HEADER)
        if session_id is not None:
            session = self._lookup(request, session_id)
            state = await self._run(self.ctx.sessions.state(session), session_id)
            return self._serialized(state, {SESSION_HEADER: session_id})
        async with self._one_shot(request) as session:
            state = await self._run(self.ctx.sessions.state(session))
        return self._serialized(state, _ONE_SHOT)

    # -- documentation ----------------------------------------------------------------------------

    async def openapi(self, request: Request) -> Response:
        """``GET /openapi.json``: an OpenAPI 3.1 document describing this server's HTTP routes."""
        if self._openapi is None:
            self._openapi = wire.dumps_bytes(build_openapi(self.ctx))
        return Response(self._openapi, media_type=_JSON)

    async def docs(self, request: Request) -> Response:
        """``GET /docs``: a self-contained HTML page (no CDN assets) listing the routes."""
        if self._docs is None:
            self._docs = docs_page(build_openapi(self.ctx))
        return HTMLResponse(self._docs)

    # -- helpers ----------------------------------------------------------------------------------

    def _lookup(self, request: Request, session_id: str) -> Session:
        """The caller's session, or a 404 reply that reveals nothing about other principals'."""
        try:
            session: Session = self.ctx.sessions.get(session_id)
        except SessionError as exc:
            if "initializing" in exc.message:
                raise _Reply(_json({"detail": f"{exc.message}; retry shortly", "code": "SESSION_ERROR"},
                                   409)) from None
            raise _Reply(_unknown(session_id)) from None
        principal = self.ctx.principal(request.headers)
        if principal is not None and session.owner is not None and session.owner != principal:
            raise _Reply(_unknown(session_id))
        return session

    @contextlib.asynccontextmanager
    async def _one_shot(self, request: Request) -> AsyncIterator[Session]:
        """A transient session for one legacy request: counted against capacity, always closed."""
        try:
            session: Session = await self.ctx.sessions.open(owner=self.ctx.principal(request.headers),
                                                            transport="http-oneshot")
        except OpenEnvError as exc:
            raise _Reply(_error(exc, _ONE_SHOT)) from None
        try:
            yield session
        except _Reply as reply:
            reply.response.headers.update(_ONE_SHOT)
            raise
        finally:
            await self.ctx.sessions.close(session, "one-shot request done")

    async def _run(self, operation: Awaitable[Any], session_id: str | None = None) -> Any:
        """Await a session operation, turning OpenEnv errors into replies."""
        try:
            return await operation
        except SessionError as exc:
            # The session was closed (DELETE, reaper) while this request waited for it.
            raise _Reply(_unknown(session_id) if session_id is not None else _error(exc)) from None
        except OpenEnvError as exc:
            raise _Reply(_error(exc)) from None

    async def _read_body(self, request: Request) -> Any:
        """The parsed JSON body (``None`` when empty), bounded by ``max_message_bytes``."""
        limit = self.ctx.config.max_message_bytes
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise _Reply(_too_large(int(declared), limit))
        buf = bytearray()
        async for chunk in request.stream():
            buf += chunk
            if len(buf) > limit:
                raise _Reply(_too_large(len(buf), limit))
        if not buf.strip():
            return None
        try:
            return wire.loads(bytes(buf))
        except json.JSONDecodeError as exc:
            # FastAPI's shape for an undecodable body (upstream answers 422, not 400 or 500).
            raise _Reply(_json({"detail": [{"type": "json_invalid", "loc": ["body", exc.pos],
                                            "msg": "JSON decode error", "input": {},
                                            "ctx": {"error": exc.msg}}]}, 422)) from None

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
            method = env.step_async if self.ctx.sessions.is_async else env.step
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

    def _observation(self, obs: Observation, headers: dict[str, str]) -> Response:
        try:
            payload = http_observation_payload(obs)
        except Exception as exc:  # e.g. "Non-finite reward: nan" (spec §11 B6)
            return _json({"detail": str(exc), "code": "EXECUTION_ERROR"}, 500, headers)
        return self._serialized(payload, headers)

    def _serialized(self, body: Any, headers: dict[str, str]) -> Response:
        try:
            content = wire.dumps_bytes(body)
        except Exception as exc:
            return _json({"detail": f"Could not serialize the reply: {exc}", "code": "EXECUTION_ERROR"},
                         500, headers)
        return Response(content, status_code=200, headers=headers, media_type=_JSON)


def _too_large(size: int, limit: int) -> Response:
    return _json({"detail": f"Request body of {size} bytes exceeds the server limit of {limit} bytes "
                            "(max_message_bytes). Send a smaller body or raise the limit.",
                  "code": "VALIDATION_ERROR"}, 413)
