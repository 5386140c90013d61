"""Server assembly: one ASGI app per env, with every installed (or chosen) transport mounted.

``create_app(env)`` builds the app; ``serve(env)`` runs it with uvicorn. The kernel itself serves
``/health``, ``/metadata``, ``/schema`` and ``/capabilities``; transports add the rest.
Security defaults: bind 127.0.0.1, optional bearer-token auth checked before any session exists.
What transports receive (``ServerConfig``, ``ServerContext``, ``TransportOptions``) is the contract
module ``openenv.context``; the first two are re-exported here for compatibility.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute

from openenv.context import AUTH_HEADER, ServerConfig, ServerContext, TransportOptions, server_config
from openenv.env import check_factory, env_class_of
from openenv.errors import ConfigError, RuleViolation, UnknownNameError
from openenv.events import ServerStarted
from openenv.guard import RequestGuard
from openenv.interfaces import ServerTransport
from openenv.limits import BodyBudget
from openenv.plugins import PluginManager, get_plugin_manager
from openenv.protocol import PROTOCOL
from openenv.rubric import check_input_fields
from openenv.sessions import SessionManager, default_max_sessions
from openenv.sessions.scoring import server_rubric
from openenv.snapshots import snapshot_key
from openenv.task_api import TaskService, task_routes
from openenv.types import Action, Observation, State
from openenv.watchdog import LoopWatchdog

__all__ = ["AUTH_HEADER", "ServerConfig", "ServerContext", "create_app", "resolve_env", "serve",
           "transport_options"]


log = logging.getLogger("openenv.server")

#: The frame protocol named in ``GET /capabilities`` (one spelling: ``openenv.protocol``).
PROTOCOL_VERSION = PROTOCOL


def resolve_env(env: Any, pm: PluginManager) -> tuple[Callable[[], Any], str]:
    """Turn an env name, ``"module:Object"`` reference, ``"NAME:ARG"`` spec (a registered env whose
    class defines ``from_spec(arg)``), class or factory into (factory, name)."""
    if isinstance(env, str):
        scheme, _, arg = env.partition(":")
        if arg and scheme in pm.catalog.envs:
            # ``NAME:ARG`` where NAME is a registered env whose class has ``from_spec``: the env is
            # built from ARG (``harbor:./tasks`` serves a folder of task folders). A registered name
            # wins over a module of that name; a plain env class keeps ``NAME:Class`` a module ref.
            target = pm.catalog.envs.get(scheme).load()
            from_spec = getattr(target, "from_spec", None)
            if callable(from_spec):
                return from_spec(arg), scheme  # served under the registered name (/harbor/tasks)
        if ":" in env:
            from openenv.registry import load_ref

            obj = load_ref(env)
            return obj, getattr(obj, "__name__", env)
        try:
            entry = pm.catalog.envs.get(env)
        except UnknownNameError as exc:
            raise UnknownNameError(
                "env", env, pm.catalog.envs.names(),
                hint="Install an env package (e.g. `pip install openenvkit-env-echo`) or pass "
                "'module:Class'.",
            ) from exc
        return entry.load(), env
    name = getattr(env, "__name__", None) or type(env).__name__
    return env, name


class OpenEnvApp(Starlette):
    """The app ``create_app`` returns: Starlette, plus a direct lane for raw WebSocket endpoints.

    A WebSocket endpoint mounted as a raw ASGI app at a fixed path (``/ws``) is called straight
    from here, so the frames of a long-lived connection do not pass through Starlette's
    exception wrapper and router on every ``send``. The lane is taken only when it changes nothing
    observable: no ``root_path``, no middleware but the kernel's own token check (whose decision
    is made here the same way; a refused request takes the ordinary path to get its 401). Add any
    middleware and every request takes the ordinary path again.
    """

    openenv_ctx: ServerContext | None = None
    #: Header/body/budget limits applied to every request first (``openenv.guard``).
    openenv_guard: RequestGuard | None = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        guard = self.openenv_guard
        if guard is not None and scope["type"] != "lifespan":
            return await guard(self._route, scope, receive, send)
        return await self._route(scope, receive, send)

    async def _route(self, scope: Any, receive: Any, send: Any) -> None:
        kind = scope["type"]
        if (kind == "http" or kind == "websocket") and not scope.get("root_path"):
            route = self._lanes(kind).get(scope["path"])
            # A wrong method takes the ordinary path, which answers the JSON 405.
            if (route is not None and (kind == "websocket" or scope["method"] in (route.methods or ()))
                    and self._direct_allowed(scope)):
                if kind == "http":
                    scope.update(app=self, router=self.router, route=route, endpoint=route.endpoint,
                                 path_params={})
                else:
                    scope["app"] = self
                return await route.app(scope, receive, send)
        return await super().__call__(scope, receive, send)

    def _lanes(self, kind: str) -> dict[str, Any]:
        """Fixed-path routes of ``kind`` ("http" or "websocket") whose endpoint is a raw ASGI app.

        Only routes the router would certainly pick: collection stops at the first route that
        could match more than one path (a path parameter, a mount, a host), and the first route
        for a path wins, as in the router (a plain function route there means no lane).
        """
        cache: dict[str, dict[str, Any]] = self.__dict__.setdefault("_openenv_lanes", {})
        lanes = cache.get(kind)
        if lanes is None:
            own, other = (Route, WebSocketRoute) if kind == "http" else (WebSocketRoute, Route)
            found: dict[str, Any] = {}
            for r in self.router.routes:
                if isinstance(r, other):
                    continue  # never matches this kind of request
                if not isinstance(r, own) or r.param_convertors:
                    break
                raw = r.app is r.endpoint and (not isinstance(r, Route) or bool(r.methods))
                found.setdefault(r.path, r if raw else None)
            lanes = cache[kind] = {path: r for path, r in found.items() if r is not None}
        return lanes

    def _direct_allowed(self, scope: Any) -> bool:
        middleware = self.user_middleware
        if not middleware:
            return True
        if len(middleware) != 1 or middleware[0].cls is not _AuthMiddleware or self.openenv_ctx is None:
            return False
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", ())}
        return self.openenv_ctx.authorized(headers)


class _AuthMiddleware:
    """Rejects requests without the token before any route (and so any session) runs."""

    def __init__(self, app: Any, ctx: ServerContext, open_paths: frozenset[str]) -> None:
        self.app, self.ctx, self.open_paths = app, ctx, open_paths

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket") or scope["path"] in self.open_paths:
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers", ())}
        if self.ctx.authorized(headers):
            return await self.app(scope, receive, send)
        body = b'{"detail":"Missing or invalid token: send the header `Authorization: Bearer <token>`."}'
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"www-authenticate", b"Bearer")]})
            await send({"type": "http.response.body", "body": body})
            return None
        await receive()  # websocket.connect
        if "websocket.http.response" in scope.get("extensions", {}):
            await send({"type": "websocket.http.response.start", "status": 401,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "websocket.http.response.body", "body": body})
        else:
            await send({"type": "websocket.close", "code": 1008})
        return None


def _route_paths(routes: list[BaseRoute]) -> list[str]:
    """The fixed paths of ``routes`` in order, each once (``/sessions/{id}`` style paths included)."""
    return list(dict.fromkeys(str(p) for r in routes if isinstance(p := getattr(r, "path", None), str) and p))


def _index(env_name: str, paths: list[str]) -> Callable[[Request], Response]:
    """``GET /``: the browser page when one is served (a person opening the server's address
    lands on it), else a small JSON index of the routes, never a bare 404."""
    def index(request: Request) -> Response:
        if "/web" in paths:  # under a path prefix too (root_path), as the page's own links are
            return RedirectResponse(request.scope.get("root_path", "") + "/web", status_code=307)
        return JSONResponse({"env": env_name, "routes": paths,
                             "hint": "GET /health, /metadata, /schema; play over /ws or a transport's routes."})

    return index


def _schema_route(ctx: ServerContext) -> Route:
    cached: dict[str, Any] = {}

    async def schema(_: Request) -> Response:
        if not cached:
            obs = ctx.observation_type.model_json_schema()
            cached.update(
                action=ctx.action_type.model_json_schema(),
                observation=obs,
                state=ctx.state_type.model_json_schema(),
                reset_observation=(ctx.reset_observation_type
                                   or getattr(ctx.env_class, "reset_observation_type", None)
                                   or ctx.observation_type).model_json_schema(),
            )
        return JSONResponse(cached)

    return Route("/schema", schema, methods=["GET"])


def create_app(
    env: Any,
    *,
    config: ServerConfig | None = None,
    plugin_manager: PluginManager | None = None,
    action_type: type[Action] | None = None,
    observation_type: type[Observation] | None = None,
    state_type: type[State] | None = None,
    reset_observation_type: type[Observation] | None = None,
    **overrides: Any,
) -> Starlette:
    """Build the ASGI app serving ``env`` (name, ``"module:Class"``, class or factory).

    Keyword overrides set ``ServerConfig`` fields (``max_sessions=8``, ``token=...``). The env's
    types come from its class unless given here (a factory function, or an env class that does not
    declare them). Rules are checked here, at construction: instances are refused, non-concurrent
    envs cannot serve several sessions, unknown transport names get a suggestion, and each
    transport's options are validated against its declared ``options_type``. Without
    ``max_sessions`` a concurrency-safe env gets ``DEFAULT_CONCURRENT_SESSIONS`` (64), any other 1.

    ``env`` may also be an app returned by ``create_app``: it is rebuilt from the same env and
    types with this call's settings (how ``openenv serve pkg.server.app:app`` applies its options).
    """
    cfg = config or server_config(**overrides)
    if config is not None and overrides:
        raise ConfigError("Pass either config= or keyword settings, not both.")
    built = getattr(getattr(env, "state", None), "openenv_build", None)
    source_app = env if isinstance(built, dict) else None
    if isinstance(built, dict):
        env = built["env"]
        action_type = action_type or built["action_type"]
        observation_type = observation_type or built["observation_type"]
        state_type = state_type or built["state_type"]
        reset_observation_type = reset_observation_type or built["reset_observation_type"]
    pm = plugin_manager or get_plugin_manager()
    factory, name = resolve_env(env, pm)
    name = cfg.env_name or name
    built_cfg = cfg
    if cfg.max_sessions is None:  # the documented default: many sessions only for a concurrency-safe env
        cfg = replace(cfg, max_sessions=default_max_sessions(factory))
    max_sessions = cfg.max_sessions
    assert max_sessions is not None
    check_factory(factory, max_sessions=max_sessions, name=name)
    cls = env_class_of(factory)
    registry = pm.catalog.transports
    wanted = list(cfg.transports) if cfg.transports is not None else registry.names()
    if not wanted:
        raise RuleViolation(
            "No transport is installed, so the server could not speak to any client. Install one, "
            "e.g. `pip install openenvkit-transport-ws`."
        )
    transport_classes = [registry.load(tname) for tname in wanted]
    options = transport_options(cfg, transport_classes)
    rubric = server_rubric(cfg.rubric, cls, pm.catalog)
    sessions = SessionManager(
        factory, env_name=name, max_sessions=max_sessions, step_timeout_s=cfg.step_timeout_s,
        factory_timeout_s=cfg.factory_timeout_s, isolation=cfg.isolation,
        idle_timeout_s=cfg.idle_timeout_s, mode=cfg.mode or "simulation",
        strict_production=cfg.strict_production, notify=pm.notify,
        action_type=action_type, rubric=rubric,
    )
    sessions.snapshot_key = snapshot_key(cfg.token)
    if rubric is not None:  # a misspelt field path fails here, once, not on every step
        check_input_fields(rubric, sessions.action_type,
                           observation_type or getattr(cls, "observation_type", None) or Observation)
    ctx = ServerContext(
        sessions=sessions, config=cfg, env_name=name,
        action_type=sessions.action_type,
        observation_type=observation_type or getattr(cls, "observation_type", None) or Observation,
        state_type=state_type or getattr(cls, "state_type", None) or State,
        env_class=cls, plugin_manager=pm, reset_observation_type=reset_observation_type,
        transport_options=options, body_budget=BodyBudget(cfg.max_body_budget_bytes),
        task_service=TaskService(sessions.tasks, name),
    )
    for transport_cls in transport_classes:
        ctx.transports.append(transport_cls(ctx))

    routes: list[BaseRoute] = [
        Route("/health", _health, methods=["GET"]),
        Route("/metadata", lambda _r: JSONResponse(ctx.metadata().model_dump()), methods=["GET"]),
        _schema_route(ctx),
        Route("/capabilities", lambda _r: JSONResponse(_capabilities(ctx)), methods=["GET"]),
    ]
    for transport in ctx.transports:
        routes.extend(transport.routes())
    assert ctx.task_service is not None
    # Last: their `/{env_name}/...` patterns must not shadow a transport's fixed paths.
    routes.extend(task_routes(ctx.task_service))
    paths = _route_paths(routes)
    routes.append(Route("/", _index(name, paths), methods=["GET"]))

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        sessions.start_reaper()
        watchdog = LoopWatchdog(name, cfg.loop_block_warn_s) if cfg.loop_block_warn_s else None
        if watchdog is not None:
            watchdog.start()
        app.state.loop_watchdog = watchdog
        for t in ctx.transports:
            await t.startup()
        tops = dict.fromkeys("/" + p.strip("/").split("/")[0] for p in paths)  # /web, not /web/api/step
        log.info("%s: routes %s%s", name, ", ".join(tops),
                 "; open /web in a browser to play" if "/web" in paths else "")
        info = ServerStarted(env=name, host=cfg.host, port=cfg.port, mode=ctx.mode.value,
                             transports=tuple(t.name for t in ctx.transports))
        pm.notify("openenv_server_started", info)
        try:
            yield
        finally:
            if watchdog is not None:
                watchdog.stop()
            await sessions.shutdown()
            for t in ctx.transports:
                await t.shutdown()
            pm.notify("openenv_server_stopped", info)

    app = OpenEnvApp(routes=routes, lifespan=lifespan, exception_handlers={HTTPException: _http_error})
    app.openenv_ctx = ctx
    app.openenv_guard = RequestGuard(max_body_bytes=cfg.max_message_bytes, budget=ctx.body_budget,
                                     max_header_count=cfg.max_header_count,
                                     max_header_bytes=cfg.max_header_bytes)
    app.state.ctx = ctx
    app.state.openenv_build = {"env": factory, "action_type": action_type, "observation_type": observation_type,
                               "state_type": state_type, "reset_observation_type": reset_observation_type,
                               "config": built_cfg, "routes": tuple(routes)}
    if isinstance(source_app, OpenEnvApp):
        _carry_additions(source_app, app)
    if ctx.auth:
        # A transport that checks the token itself on some paths (the web page's cookie) declares them.
        open_paths = frozenset({"/health"}).union(*(t.self_authenticated_paths for t in ctx.transports))
        app.add_middleware(_AuthMiddleware, ctx=ctx, open_paths=open_paths)
    return app


def _carry_additions(source: OpenEnvApp, app: OpenEnvApp) -> None:
    """Give a rebuilt app what its source app gained after ``create_app``: routes added to it
    (``app.add_route``, an upstream app's ``@app.get``), their exception handlers, and its class."""
    own = {id(r) for r in source.state.openenv_build.get("routes", ())}
    app.router.routes.extend(r for r in source.router.routes if id(r) not in own)
    for key, handler in source.exception_handlers.items():
        app.exception_handlers.setdefault(key, handler)
    if type(source) is not OpenEnvApp and isinstance(source, OpenEnvApp):
        app.__class__ = type(source)


def transport_options(cfg: ServerConfig, transports: list[type[ServerTransport]]) -> dict[str, TransportOptions]:
    """Validate the options given for each transport against its ``options_type``.

    ``cfg.transport_options`` names the transport. Options for a transport that is not mounted are
    a ``ConfigError`` with the valid names; an unknown option, one naming the transport's options.
    """
    declared: dict[str, type[TransportOptions]] = {}
    for t in transports:
        options_type = getattr(t, "options_type", None)
        if options_type is not None:
            declared[t.name] = options_type
    given: dict[str, dict[str, Any]] = {name: dict(values) for name, values in cfg.transport_options.items()}
    for name in given:
        if name not in {t.name for t in transports}:
            raise ConfigError(f"transport_options for '{name}', which is not mounted. Mounted transports: "
                              f"{', '.join(t.name for t in transports)}.")
    out: dict[str, TransportOptions] = {}
    for t in transports:
        options_type = declared.get(t.name)
        if options_type is not None:
            out[t.name] = options_type.parse(t.name, given.get(t.name, {}))
        elif given.get(t.name):
            raise ConfigError(f"Transport '{t.name}' takes no options, got: {', '.join(sorted(given[t.name]))}.")
    return out


async def _http_error(_: Request, exc: Exception) -> Response:
    """Starlette's own 404/405 as JSON ``{"detail": ...}``, as upstream (FastAPI) answers (docs/protocol.md §5)."""
    assert isinstance(exc, HTTPException)
    if exc.status_code in (204, 304):
        return Response(status_code=exc.status_code, headers=exc.headers)
    return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)


async def _health(_: Request) -> Response:
    return JSONResponse({"status": "healthy"})


def _capabilities(ctx: ServerContext) -> dict[str, Any]:
    caps: dict[str, Any] = {
        "protocol": PROTOCOL_VERSION,
        "env": ctx.env_name,
        "mode": ctx.mode.value,
        "strict_production": ctx.sessions.policy.strict,
        "transports": [t.name for t in ctx.transports],
        "extensions": [],
        "max_message_bytes": ctx.config.max_message_bytes,
        "ping_interval_s": ctx.config.ping_interval_s,
        "ping_timeout_s": ctx.config.ping_timeout_s,
        "max_sessions": ctx.config.max_sessions,
        "auth": ctx.auth,
        "tasks": ctx.sessions.tasks is not None,
        "snapshot": ctx.sessions.supports_snapshot,
    }
    for t in ctx.transports:
        extra = t.capabilities()
        caps["extensions"].extend(extra.pop("extensions", []))
        caps.update(extra)
    return caps


# `serve` (uvicorn, signals, watchdogs) lives in openenv.serving; importing it here keeps
# `from openenv.server import serve` working (openenv.serving imports this module's create_app).
from openenv.serving import serve  # noqa: E402
