"""Server assembly: one ASGI app per env, with every installed (or chosen) transport mounted.

``create_app(env)`` builds the app; ``serve(env)`` runs it with uvicorn. The kernel itself serves
``/health``, ``/metadata``, ``/schema`` and ``/capabilities``; transports add the rest.
Security defaults: bind 127.0.0.1, optional bearer-token auth checked before any session exists.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import logging
import os
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route, WebSocketRoute

from openenv.env import check_factory, env_class_of
from openenv.errors import ConfigError, RuleViolation, UnknownNameError
from openenv.events import ServerStarted
from openenv.interfaces import ServerTransport
from openenv.plugins import PluginManager, get_plugin_manager
from openenv.sessions import SessionManager
from openenv.types import Action, EnvironmentMetadata, Observation, State

__all__ = ["AUTH_HEADER", "ServerConfig", "ServerContext", "create_app", "resolve_env", "serve"]

log = logging.getLogger("openenv.server")

AUTH_HEADER = "authorization"
PROTOCOL_VERSION = "openenv-ws/2"
_MODES = ("simulation", "production")


@dataclass
class ServerConfig:
    """Everything that shapes one server. Defaults are the secure, upstream-compatible ones."""

    host: str = "127.0.0.1"
    port: int = 8000
    max_sessions: int = 1
    mode: str = "simulation"
    token: str | None = None
    step_timeout_s: float | None = None
    idle_timeout_s: float | None = 300.0
    max_message_bytes: int = 100 * 1024 * 1024
    ping_interval_s: float | None = 20.0
    ping_timeout_s: float | None = 20.0
    #: Transport names to mount; ``None`` mounts every installed transport.
    transports: Sequence[str] | None = None
    workers: int = 1
    pool_size: int = 4
    env_name: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        raw = self.mode or os.environ.get("OPENENV_MODE") or "simulation"
        mode = raw.lower()
        if mode not in _MODES:
            source = "" if self.mode else " (from OPENENV_MODE)"
            raise ConfigError(f"Invalid mode: {raw!r}{source}. Use one of: {', '.join(_MODES)}.")
        self.mode = mode
        if self.workers != 1:
            raise RuleViolation(
                f"workers={self.workers}: sessions live in one process's memory, so with several "
                "worker processes a session created on one (HTTP session create, /ws?session_id= "
                "attach) is unknown to the others. Run one worker per server and scale out with "
                "several servers (a provider with replicas, or a client-side pool)."
            )
        if self.max_message_bytes < 1024:
            raise ConfigError("max_message_bytes must be at least 1024")


@dataclass
class ServerContext:
    """What transports get: the session manager, the env's types and the config."""

    sessions: SessionManager
    config: ServerConfig
    env_name: str
    action_type: type[Action]
    observation_type: type[Observation]
    state_type: type[State]
    env_class: type | None
    plugin_manager: PluginManager
    transports: list[ServerTransport] = field(default_factory=list)
    #: What ``reset`` returns, for ``GET /schema`` (defaults to the env class's, else ``observation_type``).
    reset_observation_type: type[Observation] | None = None
    #: JSON-RPC handler for MCP requests arriving on any carrier (``/ws`` ``type:"mcp"`` frames,
    #: ``/mcp``). Set by the MCP transport; ``None`` means the env does not support MCP.
    #: Called as ``await mcp_handler(session_or_None, request_dict)`` and returns the response dict
    #: (or ``None`` for a notification).
    mcp_handler: Any = None

    @property
    def mode(self) -> str:
        return self.config.mode

    def metadata(self) -> EnvironmentMetadata:
        """Metadata of the env, from the class (``get_metadata`` is called on a bare instance only
        when the class overrides it, and never during start-up)."""
        cls: Any = self.env_class
        if cls is not None and "get_metadata" in _overrides(cls):
            try:
                # A live session's env answers best; otherwise a bare instance (no __init__, so no
                # env is built and nothing counts against capacity). Constant metadata works
                # either way; anything that needs __init__ state falls back to the defaults.
                live = next((s.env for s in self.sessions.sessions() if s.env is not None), None)
                md = (live if live is not None else cls.__new__(cls)).get_metadata()
                if isinstance(md, EnvironmentMetadata):
                    return md
                if isinstance(md, dict):
                    return EnvironmentMetadata(**md)
                return EnvironmentMetadata(**md.model_dump())
            except Exception:
                log.debug("get_metadata on a bare instance failed; using defaults", exc_info=True)
        name = self.env_name
        return EnvironmentMetadata(name=name, description=f"{name} environment", version="1.0.0")

    def authorized(self, headers: Any) -> bool:
        """Whether request headers carry the configured token (always True without a token)."""
        token = self.config.token
        if not token:
            return True
        return hmac.compare_digest(_presented_token(headers).encode(), token.encode())

    def principal(self, headers: Any) -> str | None:
        """Who is calling, as transports record it in ``Session.owner``.

        ``None`` without token auth (anyone may use any session). With it, a digest of the token
        the request presents (``"token:<32 hex digits>"``), never the token itself, so a session's
        owner can be logged or compared without holding the secret. Sessions opened over any
        transport with the same token get the same owner.
        """
        if not self.config.token:
            return None
        return "token:" + hashlib.sha256(_presented_token(headers).encode()).hexdigest()[:32]


def _presented_token(headers: Any) -> str:
    """The token a request presents: ``Authorization: Bearer <t>``, else ``X-OpenEnv-Token``."""
    value = headers.get(AUTH_HEADER) or ""
    scheme, _, given = value.partition(" ")
    if scheme.lower() != "bearer":
        given = headers.get("x-openenv-token") or ""
    return str(given)


def _overrides(cls: type) -> set[str]:
    from openenv.env import Environment

    names: set[str] = set()
    for klass in cls.__mro__:
        if klass is Environment or klass is object:
            break
        names.update(klass.__dict__)
    return names


def resolve_env(env: Any, pm: PluginManager) -> tuple[Callable[[], Any], str]:
    """Turn an env name, ``"module:Object"`` reference, class or factory into (factory, name)."""
    if isinstance(env, str):
        if ":" in env:
            from openenv.registry import load_ref

            obj = load_ref(env)
            return obj, getattr(obj, "__name__", env)
        try:
            entry = pm.catalog.envs.get(env)
        except UnknownNameError as exc:
            raise UnknownNameError(
                "env", env, pm.catalog.envs.names(),
                hint="Install an env package (e.g. `pip install openenv-env-echo`) or pass "
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

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
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
    envs cannot serve several sessions, unknown transport names get a suggestion.

    ``env`` may also be an app returned by ``create_app``: it is rebuilt from the same env and
    types with this call's settings (how ``openenv serve pkg.server.app:app`` applies its options).
    """
    cfg = config or ServerConfig(**overrides)
    if config is not None and overrides:
        raise ConfigError("Pass either config= or keyword settings, not both.")
    built = getattr(getattr(env, "state", None), "openenv_build", None)
    if isinstance(built, dict):
        env = built["env"]
        action_type = action_type or built["action_type"]
        observation_type = observation_type or built["observation_type"]
        state_type = state_type or built["state_type"]
        reset_observation_type = reset_observation_type or built["reset_observation_type"]
    pm = plugin_manager or get_plugin_manager()
    factory, name = resolve_env(env, pm)
    name = cfg.env_name or name
    check_factory(factory, max_sessions=cfg.max_sessions, name=name)
    cls = env_class_of(factory)
    sessions = SessionManager(
        factory, env_name=name, max_sessions=cfg.max_sessions, step_timeout_s=cfg.step_timeout_s,
        idle_timeout_s=cfg.idle_timeout_s, mode=cfg.mode, pool_size=cfg.pool_size, notify=pm.notify,
        action_type=action_type,
    )
    ctx = ServerContext(
        sessions=sessions, config=cfg, env_name=name,
        action_type=sessions.action_type,
        observation_type=observation_type or getattr(cls, "observation_type", None) or Observation,
        state_type=state_type or getattr(cls, "state_type", None) or State,
        env_class=cls, plugin_manager=pm, reset_observation_type=reset_observation_type,
    )
    registry = pm.catalog.transports
    wanted = list(cfg.transports) if cfg.transports is not None else registry.names()
    if not wanted:
        raise RuleViolation(
            "No transport is installed, so the server could not speak to any client. Install one, "
            "e.g. `pip install openenv-transport-ws`."
        )
    for tname in wanted:
        transport_cls = registry.load(tname)
        ctx.transports.append(transport_cls(ctx))

    routes: list[BaseRoute] = [
        Route("/health", _health, methods=["GET"]),
        Route("/metadata", lambda _r: JSONResponse(ctx.metadata().model_dump()), methods=["GET"]),
        _schema_route(ctx),
        Route("/capabilities", lambda _r: JSONResponse(_capabilities(ctx)), methods=["GET"]),
    ]
    for transport in ctx.transports:
        routes.extend(transport.routes())

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        sessions.start_reaper()
        for t in ctx.transports:
            await t.startup()
        info = ServerStarted(env=name, host=cfg.host, port=cfg.port, mode=cfg.mode,
                             transports=tuple(t.name for t in ctx.transports))
        pm.notify("openenv_server_started", info)
        try:
            yield
        finally:
            await sessions.shutdown()
            for t in ctx.transports:
                await t.shutdown()
            pm.notify("openenv_server_stopped", info)

    app = OpenEnvApp(routes=routes, lifespan=lifespan, exception_handlers={HTTPException: _http_error})
    app.openenv_ctx = ctx
    app.state.ctx = ctx
    app.state.openenv_build = {"env": factory, "action_type": action_type, "observation_type": observation_type,
                               "state_type": state_type, "reset_observation_type": reset_observation_type,
                               "config": cfg}
    if cfg.token:
        app.add_middleware(_AuthMiddleware, ctx=ctx, open_paths=frozenset({"/health"}))
    return app


async def _http_error(_: Request, exc: Exception) -> Response:
    """Starlette's own 404/405 as JSON ``{"detail": ...}``, as upstream (FastAPI) answers (spec §5)."""
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
        "mode": ctx.mode,
        "transports": [t.name for t in ctx.transports],
        "extensions": [],
        "max_message_bytes": ctx.config.max_message_bytes,
        "ping_interval_s": ctx.config.ping_interval_s,
        "ping_timeout_s": ctx.config.ping_timeout_s,
        "max_sessions": ctx.config.max_sessions,
        "auth": bool(ctx.config.token),
    }
    for t in ctx.transports:
        extra = t.capabilities()
        caps["extensions"].extend(extra.pop("extensions", []))
        caps.update(extra)
    return caps


def serve(
    env: Any,
    *,
    config: ServerConfig | None = None,
    ready_file: str | None = None,
    log_level: str = "info",
    **overrides: Any,
) -> None:
    """Serve ``env`` with uvicorn until interrupted.

    ``port=0`` binds a free port chosen by the OS; the bound port is logged and, with
    ``ready_file``, written there as JSON ``{"host", "port", "pid"}`` once the server accepts
    connections (how providers learn the port without a race).
    """
    import uvicorn

    cfg = config or ServerConfig(**overrides)
    app = create_app(env, config=cfg)
    uv_config = uvicorn.Config(
        app, host=cfg.host, port=cfg.port, log_level=log_level,
        ws_max_size=cfg.max_message_bytes,
        ws_ping_interval=cfg.ping_interval_s, ws_ping_timeout=cfg.ping_timeout_s,
        ws_per_message_deflate=False, lifespan="on", access_log=False,
        timeout_graceful_shutdown=5,
    )
    server = uvicorn.Server(uv_config)
    _run_server(server, cfg, ready_file)


def _run_server(server: Any, cfg: ServerConfig, ready_file: str | None) -> None:
    import asyncio
    import json
    import socket

    async def main() -> None:
        # proto=IPPROTO_TCP, not the default 0: asyncio enables TCP_NODELAY only on sockets whose
        # proto says TCP, and without it every small HTTP reply waits ~40 ms (Nagle + delayed ACK).
        sock = socket.socket(socket.AF_INET6 if ":" in cfg.host else socket.AF_INET, socket.SOCK_STREAM,
                             socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((cfg.host, cfg.port))
        except OSError as exc:
            sock.close()
            raise ConfigError(
                f"Cannot bind {cfg.host}:{cfg.port}: {exc.strerror}. Pick another --port, or "
                "--port 0 for a free one."
            ) from None
        sock.set_inheritable(True)
        port = sock.getsockname()[1]
        cfg.port = port
        serve_task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started and not serve_task.done():
            await asyncio.sleep(0.01)
        if server.started:
            log.info("serving on http://%s:%d", cfg.host, port)
            if ready_file:
                tmp = ready_file + ".tmp"
                with open(tmp, "w", encoding="utf-8") as f:
                    json.dump({"host": cfg.host, "port": port, "pid": os.getpid()}, f)
                os.replace(tmp, ready_file)
        await serve_task

    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        runner.run(main())


def _loop_factory() -> Callable[[], Any] | None:
    """uvloop's event loop when it is installed, else asyncio's (``None``).

    ``serve`` runs its own loop (to bind the socket itself), so uvicorn's ``loop=`` setting never
    applies here. Measured by ``bench/``: a bare WebSocket echo costs ~35% less CPU per step on
    uvloop + httptools than on asyncio + h11; ``OPENENV_LOOP=asyncio`` opts out.
    """
    if os.environ.get("OPENENV_LOOP", "auto") == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop  # type: ignore[no-any-return]
