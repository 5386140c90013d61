"""pluggy's semantics hold for every hook: call order (tryfirst/trylast) and hook wrappers."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

from openenv import hookimpl
from openenv.errors import PluginError
from openenv.events import ServerStarted
from openenv.plugins import PluginManager
from openenv.registry import Registry
from openenv.testing import make_entry_point, make_plugin_module


def _ordered_plugins(calls: list[str], hook: str) -> list[tuple[str, Any]]:
    """Plugins named after their hookimpl options, registered in a mixed-up order."""
    plugins = []
    for name, opts in [("last", {"trylast": True}), ("plain1", {}), ("first", {"tryfirst": True}),
                       ("plain2", {})]:
        def impl(*args: Any, _name: str = name, **kwargs: Any) -> None:
            calls.append(_name)

        if hook.startswith("openenv_register_"):
            def function(registry: Registry, _impl: Any = impl) -> None:
                _impl()
        else:
            def function(event: ServerStarted, _impl: Any = impl) -> None:  # type: ignore[misc]
                _impl()
        function.__name__ = hook
        plugins.append((name, make_plugin_module(hookimpl(**opts)(function))))
    return plugins


def _pluggy_order(pm: PluginManager, hook: str) -> list[str]:
    """The order pluggy itself calls the implementations in."""
    calls: list[str] = []
    caller = getattr(pm.pm.hook, hook)
    for impl in caller.get_hookimpls():
        name = pm.pm.get_name(impl.plugin)
        impl.function = (lambda n: lambda *a, **k: calls.append(n))(name)  # type: ignore[misc]
    caller(**{"registry" if hook.startswith("openenv_register_") else "event": None})
    return calls


@pytest.mark.parametrize("hook", ["openenv_register_envs", "openenv_register_commands"])
def test_catalogue_hooks_run_in_pluggys_order(hook: str) -> None:
    calls: list[str] = []
    pm = PluginManager(strict=True, entry_points=[
        make_entry_point(n, p) for n, p in _ordered_plugins(calls, hook)])
    pm.catalog  # noqa: B018 - runs the catalogue hooks
    assert calls[0] == "first" and calls[-1] == "last"
    assert calls == ["first", "plain2", "plain1", "last"]  # pluggy: LIFO between the two
    assert calls == _pluggy_order(pm, hook)


def test_lifecycle_hooks_run_in_pluggys_order() -> None:
    calls: list[str] = []
    pm = PluginManager(strict=True, entry_points=[
        make_entry_point(n, p) for n, p in _ordered_plugins(calls, "openenv_server_started")])
    pm.notify("openenv_server_started", ServerStarted(env="e", host="127.0.0.1", port=1,
                                                      mode="simulation"))
    assert calls == ["first", "plain2", "plain1", "last"]
    assert calls == _pluggy_order(pm, "openenv_server_started")


@pytest.mark.parametrize("option", ["wrapper", "hookwrapper"])
@pytest.mark.parametrize("hook", ["openenv_register_envs", "openenv_session_opened"])
def test_wrappers_on_one_by_one_hooks_are_refused_at_load(option: str, hook: str) -> None:
    def impl(registry: Any = None) -> Generator[None, Any, Any]:
        return (yield)

    def observer(event: Any = None) -> Generator[None, Any, Any]:
        return (yield)

    function = impl if hook.startswith("openenv_register_") else observer
    function.__name__ = hook
    plugin = make_plugin_module(hookimpl(**{option: True})(function))
    pm = PluginManager(strict=False, entry_points=[make_entry_point("wrapping", plugin)])
    info = pm.plugins()[0]
    assert info.status == "error"  # never "ok" while registering nothing
    assert f"'{hook}' is a hook wrapper" in (info.error or "")
    assert "drop the wrapper option" in (info.error or "")
    assert pm.pm.get_plugin("wrapping") is None
    with pytest.raises(PluginError, match="is a hook wrapper"):
        PluginManager(strict=True, entry_points=[make_entry_point("wrapping", plugin)])


def test_a_wrapper_on_the_decision_hook_works_as_pluggy_documents() -> None:
    @hookimpl
    def openenv_register_providers(registry: Registry) -> None:
        registry.register("local", "pkg.local:LocalProvider")
        registry.register("docker", "pkg.docker:DockerProvider")

    seen: list[str | None] = []

    @hookimpl(wrapper=True)
    def openenv_choose_provider(env: str, requested: str | None,
                                available: list[str]) -> Generator[None, Any, Any]:
        inner = yield  # what the other implementations (the built-in fallback) decided
        seen.append(inner)
        return "docker" if env.startswith("gpu_") else inner

    pm = PluginManager(strict=True, entry_points=[
        make_entry_point("provs", make_plugin_module(openenv_register_providers)),
        make_entry_point("gpu", make_plugin_module(openenv_choose_provider))])
    assert pm.infos["gpu"].status == "ok"
    assert pm.choose_provider("gpu_sim", None) == "docker"
    assert pm.choose_provider("echo", None) == "local"
    assert seen == ["local", "local"]
