"""``openenv.core.env_server.http_server``: upstream's ``create_app`` served by the kernel.

``create_app(MyEnv, MyAction, MyObservation, env_name="my_env", max_concurrent_envs=4)`` returns
an ASGI app built by the kernel's ``openenv.server.create_app`` with every installed transport
(WebSocket ``/ws``, HTTP sessions and upstream's ``/reset``/``/step``/``/state``, MCP ``/mcp``),
so ``server/app.py`` files keep working and ``uvicorn server.app:app`` serves them.

Upstream's construction-time rules hold, with the kernel's clearer messages:

* an env *instance* is refused (pass the class or a factory) — a ``TypeError``;
* ``max_concurrent_envs`` and ``concurrency_config`` together are refused — a ``ValueError``;
* ``max_concurrent_envs > 1`` needs ``SUPPORTS_CONCURRENT_SESSIONS = True`` — a
  ``ConcurrencyConfigurationError``. Upstream built a throwaway env to read that flag from a
  factory function; the kernel never builds an env before the first session (docs/protocol.md §11 B18), so a
  factory declares it (attribute on the function, or a return annotation naming the env class).

The app is the kernel's Starlette app with FastAPI's route API added (``UpstreamApp``):
``@app.get("/path")``, ``@app.post``, ``app.add_api_route``, ``app.include_router`` build FastAPI
routes (FastAPI must be installed, as upstream's ``openenv-core`` required it), served behind the
kernel's request limits and token check like every other route.
Differences:
``gradio_builder`` and the other web-UI arguments are accepted and ignored (a warning is logged);
``ConcurrencyConfig.session_timeout=None`` keeps the kernel's idle timeout for sessions with no
connection instead of "never". ``HTTPEnvServer(...).register_routes(app)`` adds the same routes to
an app of your own.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator, Callable
from typing import Any, cast

from openenv.core._unsupported import UnsupportedFeature
from openenv.core.env_server.exceptions import ConcurrencyConfigurationError
from openenv.core.env_server.types import ConcurrencyConfig, ServerMode
from openenv.env import Environment as _KernelEnvironment
from openenv.env import check_factory, env_class_of
from openenv.errors import ConfigError, RuleViolation
from openenv.server import OpenEnvApp
from openenv.types import Action, Observation, State

__all__ = ["HTTPEnvServer", "UpstreamApp", "create_app", "create_fastapi_app"]

log = logging.getLogger("openenv.core")


class UpstreamApp(OpenEnvApp):
    """The app upstream's ``create_app`` returns: the kernel's app plus FastAPI's route API.

    Upstream returned a FastAPI app, and env folders add routes to it (``@app.get("/info")``). The
    decorators here are FastAPI's own (an ``APIRouter`` whose route list *is* this app's), so path,
    query and body parameters, ``response_model`` and ``HTTPException`` behave as under FastAPI;
    a request that fails their validation gets FastAPI's 422. The routes sit behind the kernel's
    request guard and token check, after the env's own routes (which keep their paths).
    """

    def _api_router(self) -> Any:
        router = self.__dict__.get("_openenv_api_router")
        if router is None:
            try:
                from fastapi import APIRouter
                from fastapi.exception_handlers import request_validation_exception_handler
                from fastapi.exceptions import RequestValidationError
            except ImportError:
                raise UnsupportedFeature(
                    "FastAPI route decorators on create_app's app (app.get/post/..., add_api_route, "
                    "include_router) without FastAPI installed",
                    "`pip install 'openenvkit[fastapi]'` (upstream's openenv-core installed FastAPI), or add a "
                    "Starlette route: app.add_route('/path', endpoint, methods=['GET'])",
                ) from None
            router = APIRouter()
            router.routes = self.router.routes  # one list: what FastAPI adds, this app serves
            self.add_exception_handler(RequestValidationError, request_validation_exception_handler)  # type: ignore[arg-type]
            self.__dict__.pop("_openenv_fastapi_scope", None)
            self.__dict__["_openenv_api_router"] = router
            self.__dict__.pop("_openenv_lanes", None)  # recompute the direct lanes with the new routes
        return router

    async def _route(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            with_stack = self.__dict__["_openenv_fastapi_scope"]
        except KeyError:  # first request (also of an app rebuilt by `openenv serve`)
            with_stack = self.__dict__["_openenv_fastapi_scope"] = self._fastapi_scope()
        if with_stack is None:
            return await super()._route(scope, receive, send)
        return await with_stack(scope, receive, send)  # type: ignore[no-any-return]

    def _fastapi_scope(self) -> Any:
        """FastAPI's per-request exit stack (uploaded files, dependencies with ``yield``), which its
        routes require and its own app opens; opened here, inside the kernel's guard and token
        check, only when the app has FastAPI routes."""
        if not any(type(r).__module__.startswith("fastapi.") for r in self.router.routes):
            return None
        from fastapi.middleware.asyncexitstack import AsyncExitStackMiddleware

        return AsyncExitStackMiddleware(super()._route)

    def api_route(self, path: str, **kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """FastAPI's ``@app.api_route(path, methods=[...])``."""
        return self._api_router().api_route(path, **kwargs)  # type: ignore[no-any-return]

    def add_api_route(self, path: str, endpoint: Callable[..., Any], **kwargs: Any) -> None:
        """FastAPI's ``app.add_api_route(path, endpoint, methods=[...])``."""
        self._api_router().add_api_route(path, endpoint, **kwargs)

    def include_router(self, router: Any, **kwargs: Any) -> None:
        """FastAPI's ``app.include_router(router, prefix=..., tags=...)``."""
        self._api_router().include_router(router, **kwargs)

    def get(self, path: str, **kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        return self._api_router().get(path, **kwargs)  # type: ignore[no-any-return]

    def post(self, path: str, **kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        return self._api_router().post(path, **kwargs)  # type: ignore[no-any-return]

    def put(self, path: str, **kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        return self._api_router().put(path, **kwargs)  # type: ignore[no-any-return]

    def patch(self, path: str, **kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        return self._api_router().patch(path, **kwargs)  # type: ignore[no-any-return]

    def delete(self, path: str, **kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        return self._api_router().delete(path, **kwargs)  # type: ignore[no-any-return]

    def options(self, path: str, **kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        return self._api_router().options(path, **kwargs)  # type: ignore[no-any-return]

    def head(self, path: str, **kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        return self._api_router().head(path, **kwargs)  # type: ignore[no-any-return]

class HTTPEnvServer:
    """Upstream's route registrar: ``HTTPEnvServer(env, action_cls, observation_cls, ...).register_routes(app)``.

    The constructor takes upstream's arguments and applies ``create_app``'s rules.
    ``register_routes(app)`` adds the routes of the app ``create_app`` would build (``/ws``, HTTP,
    ``/mcp``, ``/health``, ``/metadata``, ``/schema``) to your Starlette (or FastAPI) app and runs
    their start-up and shutdown inside the app's own lifespan. The kernel's request-size guard is
    not applied to the host app (its own middleware is); serve ``create_app``'s app for that.
    Subclasses may override ``register_routes`` and call ``super().register_routes(app)``.
    """

    def __init__(
        self,
        env: Callable[[], Any],
        action_cls: type[Action],
        observation_cls: type[Observation],
        max_concurrent_envs: int | None = None,
        concurrency_config: ConcurrencyConfig | None = None,
    ) -> None:
        self.env, self.action_cls, self.observation_cls = env, action_cls, observation_cls
        self.max_concurrent_envs, self.concurrency_config = max_concurrent_envs, concurrency_config
        # Built now so that bad arguments fail where upstream's constructor failed.
        self._app = create_fastapi_app(env, action_cls, observation_cls, max_concurrent_envs, concurrency_config)

    def register_routes(self, app: Any, mode: ServerMode | str | None = None) -> None:
        """Serve the env's routes from ``app`` (a Starlette or FastAPI app)."""
        built = self._app
        if mode is not None:
            built = create_fastapi_app(self.env, self.action_cls, self.observation_cls, self.max_concurrent_envs,
                                       self.concurrency_config, mode=mode)
        router = getattr(app, "router", None)
        if router is None or not hasattr(router, "routes"):
            raise RuleViolation(f"register_routes needs a Starlette or FastAPI app, got {type(app).__name__}. "
                                "Or serve the app create_app(...) returns.")
        router.routes.extend(built.router.routes)
        app.state.ctx = built.state.ctx
        app.state.openenv_build = built.state.openenv_build
        host_lifespan, env_lifespan = router.lifespan_context, built.router.lifespan_context

        @contextlib.asynccontextmanager
        async def lifespan(host: Any) -> AsyncIterator[Any]:
            async with env_lifespan(built), host_lifespan(host) as value:
                yield value

        router.lifespan_context = lifespan


def create_app(
    env: Callable[[], Any],
    action_cls: type[Action],
    observation_cls: type[Observation],
    env_name: str | None = None,
    max_concurrent_envs: int | None = None,
    concurrency_config: ConcurrencyConfig | None = None,
    gradio_builder: Callable[..., Any] | None = None,
    custom_tab_name: str = "Custom",
    custom_tab_primary: bool = False,
    show_default_tab: bool = True,
    title_override: str | None = None,
    state_cls: type[State] = State,
    *,
    mode: ServerMode | str | None = None,
    reset_observation_cls: type[Observation] | None = None,
) -> UpstreamApp:
    """Serve ``env`` (a class or factory) with every installed transport; upstream's signature."""
    web_args = {
        "gradio_builder": gradio_builder is not None,
        "custom_tab_name": custom_tab_name != "Custom",
        "custom_tab_primary": custom_tab_primary,
        "show_default_tab": not show_default_tab,
        "title_override": title_override is not None,
    }
    ignored = sorted(name for name, given in web_args.items() if given)
    if ignored or os.environ.get("ENABLE_WEB_INTERFACE", "").lower() in ("true", "1", "yes"):
        log.warning(
            "create_app: the Gradio web interface is not provided (%s ignored); the server runs "
            "without it. A web UI, when installed, is a transport plugin and mounts itself.",
            ", ".join(ignored) or "ENABLE_WEB_INTERFACE",
        )
    return create_fastapi_app(
        env, action_cls, observation_cls, max_concurrent_envs, concurrency_config,
        env_name=env_name, state_cls=state_cls, mode=mode, reset_observation_cls=reset_observation_cls,
    )


def create_fastapi_app(
    env: Callable[[], Any],
    action_cls: type[Action],
    observation_cls: type[Observation],
    max_concurrent_envs: int | None = None,
    concurrency_config: ConcurrencyConfig | None = None,
    env_name: str | None = None,
    state_cls: type[State] = State,
    *,
    mode: ServerMode | str | None = None,
    reset_observation_cls: type[Observation] | None = None,
) -> UpstreamApp:
    """Upstream's app without the web interface; here the same as ``create_app``.

    Returns the kernel's Starlette app with FastAPI's route API (``UpstreamApp``).
    """
    from openenv.server import ServerConfig
    from openenv.server import create_app as kernel_create_app

    if isinstance(env, _KernelEnvironment) or not callable(env):
        raise RuleViolation(
            f"env must be a callable (class or factory function), got {type(env)!r}. Pass the "
            f"environment class (e.g. `{type(env).__name__}`), not an instance (`{type(env).__name__}()`): "
            "every session builds its own env."
        )
    if max_concurrent_envs is not None and concurrency_config is not None:
        raise ConfigError(
            "Cannot specify both 'max_concurrent_envs' and 'concurrency_config'. Pass "
            "max_concurrent_envs=N for the session limit alone, or "
            "concurrency_config=ConcurrencyConfig(max_concurrent_envs=N, session_timeout=...) to also "
            "set the idle timeout."
        )
    _check_model(action_cls, Action, "action_cls")
    _check_model(observation_cls, Observation, "observation_cls")
    _check_model(state_cls, State, "state_cls")
    if reset_observation_cls is not None:
        _check_model(reset_observation_cls, Observation, "reset_observation_cls")

    settings: dict[str, Any] = {"max_sessions": 1}
    if concurrency_config is not None:
        if isinstance(concurrency_config, dict):
            concurrency_config = ConcurrencyConfig.model_validate(concurrency_config)
        settings["max_sessions"] = concurrency_config.max_concurrent_envs
        if concurrency_config.session_timeout is not None:
            settings["idle_timeout_s"] = concurrency_config.session_timeout
    elif max_concurrent_envs is not None:
        settings["max_sessions"] = max_concurrent_envs

    name = env_name or getattr(env_class_of(env) or env, "__name__", None) or "environment"
    downgraded: int | None = None
    try:
        check_factory(env, max_sessions=settings["max_sessions"], name=name)
    except RuleViolation as exc:
        if "SUPPORTS_CONCURRENT_SESSIONS" not in str(exc):
            raise
        if isinstance(env, type):  # a class that says it is not concurrent: upstream refuses too
            raise ConcurrencyConfigurationError(name, settings["max_sessions"], message=str(exc)) from None
        # A factory function: upstream serves it, so we do, with the concurrency the env declares
        # (one session), and say so when the server starts — not at import (issue 32).
        downgraded, settings["max_sessions"] = settings["max_sessions"], 1

    mode_value = mode.value if isinstance(mode, ServerMode) else mode
    config = ServerConfig(env_name=env_name, mode=mode_value, **settings)  # type: ignore[arg-type]
    app = kernel_create_app(
        env,
        config=config,
        action_type=_action_type_for(env, action_cls),
        observation_type=observation_cls,
        state_type=None if state_cls is State else state_cls,
        reset_observation_type=reset_observation_cls,
    )
    # The kernel's app, typed as upstream's (a subclass adding FastAPI's route API; no new state).
    assert isinstance(app, OpenEnvApp)
    app.__class__ = UpstreamApp
    app = cast(UpstreamApp, app)
    if downgraded is not None:
        _warn_at_start(app, f"{name}: create_app(max_concurrent_envs={downgraded}) asks for {downgraded} sessions, "
                            "but the factory's env is not marked SUPPORTS_CONCURRENT_SESSIONS, so this server "
                            "holds 1 session. To serve more, set SUPPORTS_CONCURRENT_SESSIONS = True on the env "
                            "class (and annotate the factory's return type with it, `def make_env() -> MyEnv:`); "
                            "or pass max_concurrent_envs=1 to silence this.")
    return app


def _warn_at_start(app: UpstreamApp, message: str) -> None:
    """Log ``message`` when the server starts (its lifespan), not when the app module is imported."""
    inner = app.router.lifespan_context

    @contextlib.asynccontextmanager
    async def lifespan(host: Any) -> AsyncIterator[Any]:
        log.warning("%s", message)
        async with inner(host) as value:
            yield value

    app.router.lifespan_context = lifespan


def _check_model(value: Any, base: type, what: str) -> None:
    if not (isinstance(value, type) and issubclass(value, base)):
        raise RuleViolation(
            f"{what} must be a subclass of {base.__name__}, got {value!r}. Pass the class itself "
            f"(e.g. `My{base.__name__}`), in create_app's order: env, action_cls, observation_cls."
        )


def _action_type_for(env: Any, action_cls: type[Action]) -> type[Action] | None:
    """The action type the server validates with.

    For a tool env (``MCPEnvironment``) the env's own dispatching type stays in charge: an MCP
    action class (or the base ``Action``) adds nothing, and an env-specific class becomes the
    type accepted besides ``list_tools``/``call_tool`` (docs/protocol.md §2.5).
    """
    cls = env_class_of(env)
    from openenv.tools import MCP_ACTION_TYPES, ToolAction, ToolEnvironment

    if isinstance(cls, type) and issubclass(cls, ToolEnvironment):
        base: type[ToolAction] = cls.action_type if issubclass(cls.action_type, ToolAction) else ToolAction
        if action_cls in MCP_ACTION_TYPES:
            return base
        return base.accepting(action_cls)
    return action_cls
