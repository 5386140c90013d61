"""``create_app`` / ``create_fastapi_app``: upstream's parameters and construction-time rules."""

from __future__ import annotations

import logging
import threading
from typing import Any

import pytest
from layer_helpers import serving
from upstream_style_echo.models import UpstreamStyleEchoAction, UpstreamStyleEchoObservation
from upstream_style_echo.server import UpstreamStyleEchoEnvironment

from openenv.core.env_server import (
    ConcurrencyConfig,
    ConcurrencyConfigurationError,
    Environment,
    ServerMode,
    create_app,
    create_fastapi_app,
)
from openenv.core.env_server.types import Action, Observation, State
from openenv.errors import ConfigError, RuleViolation


class Single(Environment):
    """Not declared concurrency-safe."""

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Observation:
        return Observation()

    def step(self, action: UpstreamStyleEchoAction) -> UpstreamStyleEchoObservation:  # type: ignore[override]
        return UpstreamStyleEchoObservation(echoed_message=action.message)

    @property
    def state(self) -> State:
        return State()


def build(env: Any = UpstreamStyleEchoEnvironment, **kwargs: Any) -> Any:
    return create_app(env, UpstreamStyleEchoAction, UpstreamStyleEchoObservation, **kwargs)


def test_returns_a_kernel_app_with_upstreams_settings() -> None:
    app = build(env_name="echo_x", max_concurrent_envs=3)
    ctx = app.state.ctx
    assert ctx.env_name == "echo_x" and ctx.config.max_sessions == 3
    assert ctx.action_type is UpstreamStyleEchoAction and ctx.observation_type is UpstreamStyleEchoObservation
    assert ctx.config.mode == "simulation"
    assert {"mcp", "rest", "ws"} <= {t.name for t in ctx.transports}  # every installed transport


def test_instance_is_refused_with_the_way_out() -> None:
    with pytest.raises(TypeError) as info:
        build(UpstreamStyleEchoEnvironment())
    assert "not an instance" in str(info.value) and "UpstreamStyleEchoEnvironment" in str(info.value)


def test_both_concurrency_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="Cannot specify both 'max_concurrent_envs' and 'concurrency_config'"):
        build(max_concurrent_envs=2, concurrency_config=ConcurrencyConfig(max_concurrent_envs=2))


def test_concurrency_needs_the_declaration() -> None:
    with pytest.raises(ConcurrencyConfigurationError) as info:
        build(Single, max_concurrent_envs=2)
    err = info.value
    assert isinstance(err, RuleViolation) and isinstance(err, TypeError)
    assert err.environment_name == "Single" and err.max_concurrent_envs == 2
    assert str(err).startswith("Environment 'Single' is not marked as SUPPORTS_CONCURRENT_SESSIONS.")
    assert "SUPPORTS_CONCURRENT_SESSIONS = True" in str(err)
    build(Single, max_concurrent_envs=1)  # one session is always fine


def test_factory_functions_declare_their_class_instead_of_being_called() -> None:
    calls = []

    def undeclared():  # upstream would build (and close) a throwaway env here to find out
        calls.append(1)
        return UpstreamStyleEchoEnvironment()

    # Upstream serves such an app: here it serves too, with one session, and warns when it starts (issue 32).
    app = build(undeclared, max_concurrent_envs=2)
    assert app.state.ctx.config.max_sessions == 1 and calls == []

    def declared() -> UpstreamStyleEchoEnvironment:
        calls.append(1)
        return UpstreamStyleEchoEnvironment()

    app = build(declared, max_concurrent_envs=2)
    assert app.state.ctx.config.max_sessions == 2
    assert calls == []  # no env is built before the first session (B18)


def test_concurrency_config_sets_capacity_and_idle_timeout() -> None:
    app = build(concurrency_config=ConcurrencyConfig(max_concurrent_envs=4, session_timeout=12.5))
    assert (app.state.ctx.config.max_sessions, app.state.ctx.config.idle_timeout_s) == (4, 12.5)
    default = build(concurrency_config=ConcurrencyConfig(max_concurrent_envs=2))
    assert default.state.ctx.config.idle_timeout_s == 300.0  # no-connection sessions still expire (B16)


def test_mode_and_state_cls() -> None:
    class MyState(State):
        level: int = 0

    app = create_fastapi_app(UpstreamStyleEchoEnvironment, UpstreamStyleEchoAction, UpstreamStyleEchoObservation,
                             state_cls=MyState, mode=ServerMode.PRODUCTION)
    assert app.state.ctx.config.mode == "production" and app.state.ctx.state_type is MyState
    with pytest.raises(ConfigError, match="Invalid mode"):
        build(mode="staging")


def test_wrong_argument_order_gets_a_clear_error() -> None:
    with pytest.raises(RuleViolation, match="action_cls must be a subclass of Action"):
        create_app(UpstreamStyleEchoEnvironment, UpstreamStyleEchoObservation, UpstreamStyleEchoAction)


def test_web_interface_arguments_are_ignored_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="openenv.core"):
        app = build(gradio_builder=lambda *a: None, title_override="Echo")
    assert app.state.ctx.env_name == "UpstreamStyleEchoEnvironment"
    assert "gradio_builder, title_override ignored" in caplog.text


def test_env_types_are_read_from_upstream_style_signatures() -> None:
    assert UpstreamStyleEchoEnvironment.action_type is UpstreamStyleEchoAction
    assert UpstreamStyleEchoEnvironment.observation_type is UpstreamStyleEchoObservation
    assert UpstreamStyleEchoEnvironment.THREAD_AFFINITY is True  # upstream's per-session thread

    class Explicit(Environment[UpstreamStyleEchoAction, Observation, State]):
        def step(self, action: Any) -> UpstreamStyleEchoObservation:  # type: ignore[override]
            return UpstreamStyleEchoObservation()

    # generic parameters win over annotations
    assert (Explicit.action_type, Explicit.observation_type) == (UpstreamStyleEchoAction, Observation)

    class Vague(Environment):
        def step(self, action: Action) -> Observation:  # type: ignore[override]
            return Observation()

    # base classes in annotations say nothing: no action type is declared, and reading it says so
    assert Vague.observation_type is Observation
    with pytest.raises(RuleViolation) as info:
        _ = Vague.action_type
    assert "declares no action type" in str(info.value) and "base class `Action`" in str(info.value)
    # upstream's create_app passes the types explicitly: that serves the same env
    app = create_app(Vague, UpstreamStyleEchoAction, UpstreamStyleEchoObservation)
    assert app.state.ctx.action_type is UpstreamStyleEchoAction


def test_rebuilding_an_app_keeps_env_and_types() -> None:
    from openenv.server import create_app as kernel_create_app

    app = build(max_concurrent_envs=2, env_name="echo_y")
    again = kernel_create_app(app, max_sessions=3, env_name="echo_y")
    assert again.state.ctx.action_type is UpstreamStyleEchoAction
    assert again.state.ctx.config.max_sessions == 3
    assert again.state.ctx.sessions.factory is UpstreamStyleEchoEnvironment


class HalfAsync(Environment):
    """Only ``step`` is async (upstream then ran the sync ``reset`` on a worker thread)."""

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Observation:
        return Observation(metadata={"thread": threading.current_thread().name})

    def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        raise AssertionError("served through step_async")

    async def step_async(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        return Observation(metadata={"thread": threading.current_thread().name})

    @property
    def state(self) -> State:
        return State()


def test_half_async_env_never_blocks_the_event_loop() -> None:
    from openenv.core import GenericEnvClient

    app = create_app(HalfAsync, Action, Observation)
    with serving(app) as url, GenericEnvClient(base_url=url).sync() as env:
        reset_thread = env.reset().observation["metadata"]["thread"]
        step_thread = env.step({}).observation["metadata"]["thread"]
    assert step_thread == "layer-uvicorn"  # awaited on the server's loop
    assert reset_thread != "layer-uvicorn"  # the sync half ran in a worker thread


def test_an_undeclared_factory_warns_at_start_not_at_import(caplog: pytest.LogCaptureFixture) -> None:
    from starlette.testclient import TestClient

    def make_env():  # type: ignore[no-untyped-def]
        return Single()

    with caplog.at_level(logging.WARNING, logger="openenv.core"):
        app = build(make_env, max_concurrent_envs=4)
        assert "SUPPORTS_CONCURRENT_SESSIONS" not in caplog.text  # nothing at import
        with TestClient(app) as client:
            assert client.post("/reset", json={}).status_code == 200
    assert "create_app(max_concurrent_envs=4)" in caplog.text and "holds 1 session" in caplog.text
    assert "SUPPORTS_CONCURRENT_SESSIONS = True" in caplog.text
