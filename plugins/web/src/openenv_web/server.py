"""Server side of ``/web``: the page and the small JSON API it plays through.

Routes (all fixed paths, so the kernel's auth middleware and router treat them like any other):

* ``GET /web`` — the page (one HTML document, its script and style inlined; nothing from a CDN).
  ``/web?token=<t>`` with the server's token answers ``303 /web`` and sets the HttpOnly,
  ``SameSite=Strict`` cookie ``openenv_web_token``, so the token leaves the address bar and the
  page's own requests carry it.
* ``POST /web/api/schema`` — the action's and the observation's JSON schemas (as ``GET /schema``'s
  ``action`` and ``observation``: the page finds declared image fields there), here so that the
  page needs no path outside ``/web`` (the cookie is scoped to ``/web``).
* ``POST /web/api/session`` — open this tab's session (``201 {"session_id", ...}``); at capacity
  ``503`` with the manager's ``CAPACITY_REACHED`` error, which the page shows.
* ``POST /web/api/reset`` ``{"session_id", "seed"?}``, ``POST /web/api/step``
  ``{"session_id", "action"}``, ``POST /web/api/state`` ``{"session_id"}``.
* ``POST /web/api/close`` ``{"session_id"}`` — what the page's ``navigator.sendBeacon`` sends on
  ``pagehide``; an abandoned tab's session is closed by the manager's idle reaping instead.

Promises: every session is opened, stepped and closed through ``ctx.sessions`` (the same capacity,
mode rule, validation and idle timeout as every transport); a tab knows only its own session id
(a random UUID kept in the tab's memory), and with token auth a session is also bound to the
principal that opened it (``ServerContext.principal``), so no visitor reaches another's session.
Errors are JSON ``{"detail", "code", ...}``; an invalid action is ``422`` with the validation
errors (``loc`` relative to the action), which the page shows next to the field.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from http.cookies import SimpleCookie
from importlib import resources
from typing import Any, ClassVar
from urllib.parse import parse_qs

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import BaseRoute, Route

from openenv import limits, wire
from openenv.context import AUTH_HEADER, ServerContext
from openenv.errors import CapacityError, ModeError, OpenEnvError, SessionError, ValidationError
from openenv.interfaces import ServerTransport
from openenv.sessions import ResetRequiredError, Session
from openenv.types import StepOutcome

__all__ = ["COOKIE", "WebTransport"]

#: The cookie ``/web?token=`` sets (HttpOnly, SameSite=Strict, Path=/web).
COOKIE = "openenv_web_token"
#: Largest request body the API reads (an action typed into the page).
_MAX_BODY = 1024 * 1024
_TOOL_TYPES = frozenset({"list_tools", "call_tool"})


def _json(body: Any, status: int = 200) -> Response:
    return Response(wire.dumps_bytes(body), status, media_type="application/json")


def _fail(detail: str, code: str, status: int, **extra: Any) -> Response:
    return _json({"detail": detail, "code": code, **extra}, status)


def _error(exc: OpenEnvError) -> Response:
    if isinstance(exc, ValidationError):
        return _json({"detail": exc.errors, "code": exc.code}, 422)
    data = dict(exc.to_wire())
    body: dict[str, Any] = {"detail": data.pop("message", exc.message), "code": data.pop("code", exc.code)}
    if "detail" in data:
        body["reason"] = data.pop("detail")
    body.update(data)
    status = 500
    if isinstance(exc, CapacityError):
        status = 503
    elif isinstance(exc, ModeError):
        status = 404
    elif isinstance(exc, ResetRequiredError):
        status = 409
    return _json(body, status)


def _page_template() -> str:
    static = resources.files("openenv_web").joinpath("static")
    html = static.joinpath("page.html").read_text("utf-8")
    return (html.replace("/*@CSS@*/", static.joinpath("app.css").read_text("utf-8"))
            .replace("/*@JS@*/", static.joinpath("app.js").read_text("utf-8")))


class _EveryMethod:
    """An ASGI app calling ``endpoint`` for a request of any method."""

    def __init__(self, endpoint: Callable[[Request], Awaitable[Response]]) -> None:
        self.endpoint = endpoint

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        response = await self.endpoint(Request(scope, receive, send))
        await response(scope, receive, send)


class WebTransport(ServerTransport):
    """The ``/web`` page and its JSON API, one session per browser tab."""

    name = "web"
    #: Every path this transport serves. The transport checks the token on each itself (header or
    #: the page's cookie), so a kernel that honours this attribute may let them past its header-only
    #: auth middleware (see the package README, "Token").
    self_authenticated_paths: ClassVar[frozenset[str]] = frozenset({
        "/web", "/web/api/schema", "/web/api/session", "/web/api/reset", "/web/api/step", "/web/api/state",
        "/web/api/close"})

    def __init__(self, ctx: ServerContext) -> None:
        super().__init__(ctx)
        self._sessions = ctx.sessions
        self._page: bytes | None = None
        self._schema: bytes | None = None

    def routes(self) -> list[BaseRoute]:
        return [
            self._route("/web/api/step", self.step, "POST"),
            self._route("/web/api/reset", self.reset, "POST"),
            self._route("/web/api/state", self.state, "POST"),
            self._route("/web/api/session", self.open_session, "POST"),
            self._route("/web/api/schema", self.schema, "POST"),
            self._route("/web/api/close", self.close, "POST"),
            self._route("/web", self.page, "GET"),
        ]

    def _route(self, path: str, endpoint: Callable[[Request], Awaitable[Response]], method: str) -> Route:
        """A route that takes every method, so the token is checked before the method: an
        unauthenticated request gets ``401`` whatever its method, as on every other route (the
        kernel's auth middleware lets these paths through to this transport's own check)."""
        allowed = {method, "HEAD"} if method == "GET" else {method}

        async def checked(request: Request) -> Response:
            if request.method in allowed:
                return await endpoint(request)
            denied = self._denied(self._presented(request))
            if denied is not None:
                return denied
            reply = _fail(f"{request.method} is not allowed on {path}; use {method}.", "METHOD_NOT_ALLOWED", 405)
            reply.headers["allow"] = ", ".join(sorted(allowed))
            return reply

        # An ASGI app, not a function: Starlette gives a function route only the methods listed
        # (GET by default) and answers the others itself, before `checked` could run.
        return Route(path, _EveryMethod(checked))

    def capabilities(self) -> dict[str, Any]:
        return {"web": {"path": "/web", "idle_timeout_s": self._sessions.idle_timeout_s}}

    # -- auth -------------------------------------------------------------------------------------

    def _presented(self, request: Request) -> dict[str, str]:
        """Request headers, with the page's cookie turned into the bearer header it stands for."""
        headers = {k.lower(): v for k, v in request.headers.items()}
        if self.ctx.config.token and not self.ctx.authorized(headers):
            jar: SimpleCookie = SimpleCookie()
            try:
                jar.load(headers.get("cookie", ""))
            except Exception:
                return headers
            morsel = jar.get(COOKIE)
            if morsel is not None:
                headers[AUTH_HEADER] = f"Bearer {morsel.value}"
        return headers

    def _denied(self, headers: dict[str, str]) -> Response | None:
        if self.ctx.authorized(headers):
            return None
        return _fail("Missing or invalid token: open the page as /web?token=<token> (it sets a cookie), "
                     "or send the header `Authorization: Bearer <token>`.", "AUTH_ERROR", 401)

    # -- page -------------------------------------------------------------------------------------

    async def page(self, request: Request) -> Response:
        """``GET /web``: the page; ``?token=`` sets the cookie and redirects to the bare path."""
        token = self.ctx.config.token
        given = parse_qs(request.url.query).get("token")
        if token and given:
            if not hmac.compare_digest(given[0].encode(), token.encode()):
                return _fail("Invalid token in /web?token=: use the token the server was started with "
                             "(--token).", "AUTH_ERROR", 401)
            reply = RedirectResponse("/web", status_code=303)
            reply.set_cookie(COOKIE, given[0], httponly=True, samesite="strict", path="/web")
            return reply
        denied = self._denied(self._presented(request))
        if denied is not None:
            return denied
        if self._page is None:
            self._page = _page_template().encode("utf-8")
        return Response(self._page, media_type="text/html; charset=utf-8",
                        headers={"cache-control": "no-store", "x-content-type-options": "nosniff"})

    # -- API --------------------------------------------------------------------------------------

    async def _body(self, request: Request) -> tuple[dict[str, str], dict[str, Any]] | Response:
        headers = self._presented(request)
        denied = self._denied(headers)
        if denied is not None:
            return denied
        raw = await request.body()
        if len(raw) > _MAX_BODY:
            return _fail(f"Request body over {_MAX_BODY} bytes.", "VALIDATION_ERROR", 413)
        try:
            # The kernel's depth limit, as on every transport: nothing deep reaches validation
            # (whose error would echo the input and overflow the stack while being encoded).
            data = limits.loads(raw) if raw else {}
        except limits.JSONTooDeepError as exc:  # well-formed, but past a limit: REST's 422
            return _fail(f"Request body refused: {exc.msg} (limit {exc.limit}).", "VALIDATION_ERROR", 422,
                         max_json_depth=exc.limit)
        except wire.JSONDecodeError as exc:
            return _fail(f"Request body is not JSON: {exc}.", "VALIDATION_ERROR", 400)
        if not isinstance(data, dict):
            return _fail("Request body must be a JSON object.", "VALIDATION_ERROR", 400)
        return headers, data

    def _session(self, headers: dict[str, str], data: dict[str, Any]) -> Session | Response:
        session_id = data.get("session_id")
        if not isinstance(session_id, str) or not session_id:
            return _fail("Missing session_id: POST /web/api/session first.", "SESSION_ERROR", 400)
        gone = _fail(f"Unknown session_id: {session_id} (closed or idle too long); open a new session.",
                     "SESSION_ERROR", 404)
        try:
            session = self._sessions.get(session_id)
        except SessionError:
            return gone
        if session.transport != "web":
            return gone  # the page drives only sessions it opened
        principal = self.ctx.principal(headers)
        if session.owner is not None and principal != session.owner:
            return gone
        return session

    async def schema(self, request: Request) -> Response:
        """The action's and observation's JSON schemas (as ``GET /schema`` gives them), behind the page's auth."""
        got = await self._body(request)
        if isinstance(got, Response):
            return got
        if self._schema is None:
            self._schema = wire.dumps_bytes({"action": self.ctx.action_type.model_json_schema(),
                                             "observation": self.ctx.observation_type.model_json_schema()})
        return Response(self._schema, media_type="application/json")

    async def open_session(self, request: Request) -> Response:
        got = await self._body(request)
        if isinstance(got, Response):
            return got
        headers, _ = got
        try:
            session = await self._sessions.open(owner=self.ctx.principal(headers), transport="web")
        except OpenEnvError as exc:
            return _error(exc)
        return _json({"session_id": session.id, "env": self.ctx.env_name,
                      "idle_timeout_s": self._sessions.idle_timeout_s,
                      "max_sessions": self._sessions.max_sessions}, 201)

    async def _bound(self, request: Request) -> tuple[Any, dict[str, Any]] | Response:
        """The request's JSON body and the visitor's session, or the error reply to send instead."""
        got = await self._body(request)
        if isinstance(got, Response):
            return got
        headers, data = got
        session = self._session(headers, data)
        if isinstance(session, Response):
            return session
        return session, data

    async def reset(self, request: Request) -> Response:
        bound = await self._bound(request)
        if isinstance(bound, Response):
            return bound
        session, data = bound
        args = {k: v for k, v in data.items() if k in ("seed", "episode_id") and v is not None}
        try:
            outcome = await self._sessions.reset_outcome(session, args)
        except SessionError:
            return _fail("The session closed while resetting; open a new session.", "SESSION_ERROR", 404)
        except OpenEnvError as exc:
            return _error(exc)
        return self._observation(outcome)

    async def step(self, request: Request) -> Response:
        bound = await self._bound(request)
        if isinstance(bound, Response):
            return bound
        session, data = bound
        action = data.get("action")
        if not isinstance(action, dict):
            return _json({"detail": [{"type": "missing", "loc": [], "msg": "action must be a JSON object",
                                      "input": action}], "code": "VALIDATION_ERROR"}, 422)
        try:
            outcome = await self._sessions.step_outcome(session, action, tool=action.get("type") in _TOOL_TYPES)
        except SessionError:
            return _fail("The session closed while stepping; open a new session.", "SESSION_ERROR", 404)
        except OpenEnvError as exc:
            return _error(exc)
        return self._observation(outcome)

    async def state(self, request: Request) -> Response:
        bound = await self._bound(request)
        if isinstance(bound, Response):
            return bound
        session, _ = bound
        try:
            return _json(await self._sessions.state(session))
        except OpenEnvError as exc:
            return _error(exc)

    async def close(self, request: Request) -> Response:
        bound = await self._bound(request)
        if isinstance(bound, Response):
            return bound
        session, _ = bound
        closed = await self._sessions.request_close(session, "web page closed")
        return _json({"session_id": session.id, "closed": closed})

    def _observation(self, outcome: StepOutcome) -> Response:
        # The page always shows a server rubric's components (other clients opt in with the
        # ``openenv-reward-components`` header, docs/protocol.md §2.7; the page is ours, so it always does).
        try:
            return _json(outcome.http_payload(components=True))
        except Exception as exc:  # e.g. a non-finite reward, an unserialisable field
            return _fail(f"Could not serialise the observation: {exc}", "EXECUTION_ERROR", 500)
