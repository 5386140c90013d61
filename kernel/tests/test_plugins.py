"""The plugin manager: discovery, isolation of broken plugins, strict mode, switches, hooks."""

from __future__ import annotations

import logging

import pytest

from openenv import hookimpl
from openenv.errors import PluginError, UnknownNameError
from openenv.events import ServerStarted, SessionClosed, SessionOpened
from openenv.plugins import PluginManager
from openenv.registry import NameConflictError, Registry, TransportRegistry
from openenv.testing import FakeEntryPoint, make_entry_point, make_plugin_module

# -- plugin modules used below --------------------------------------------------------------------


def env_plugin(*names: str, module: str = "pkg.env") -> object:
    @hookimpl
    def openenv_register_envs(registry: Registry) -> None:
        for n in names:
            registry.register(n, f"{module}:{n.title()}Env", description=f"the {n} env")

    return make_plugin_module(openenv_register_envs)


def transport_plugin(name: str) -> object:
    @hookimpl
    def openenv_register_transports(registry: TransportRegistry) -> None:
        registry.register(name, server=f"pkg.{name}:Transport", client=f"pkg.{name}:Connector")

    return make_plugin_module(openenv_register_transports)


def raising_catalogue_plugin() -> object:
    """Registers an env fine, then raises in its provider hook."""

    @hookimpl
    def openenv_register_envs(registry: Registry) -> None:
        registry.register("half", "pkg.half:HalfEnv")

    @hookimpl
    def openenv_register_providers(registry: Registry) -> None:
        raise RuntimeError("provider table corrupt")

    return make_plugin_module(openenv_register_envs, openenv_register_providers)


def misspelled_plugin() -> object:
    @hookimpl
    def openenv_register_env(registry: Registry) -> None:  # the spec is openenv_register_envs
        registry.register("never", "pkg:Never")

    return make_plugin_module(openenv_register_env)


# -- discovery --------------------------------------------------------------------------------------


def test_discovers_fake_entry_points_with_dist_and_attribution() -> None:
    eps = [
        make_entry_point("alpha", env_plugin("a1", "a2"), dist="openenv-alpha", version="1.2.3"),
        make_entry_point("beta", transport_plugin("bt"), dist="openenv-beta", version="0.4"),
    ]
    pm = PluginManager(strict=True, entry_points=eps)

    assert pm.catalog.envs.names() == ["a1", "a2"]
    assert pm.catalog.envs.get("a1").plugin == "alpha"
    assert pm.catalog.transports.get("bt").plugin == "beta"
    assert pm.catalog.transports.get("bt").client == "pkg.bt:Connector"
    assert pm.catalog.transports.get("bt").to_json()["client"] == "pkg.bt:Connector"

    infos = {i.name: i for i in pm.plugins()}
    assert set(infos) == {"alpha", "beta"}  # built-in hidden by default
    alpha = infos["alpha"]
    assert (alpha.dist, alpha.version, alpha.status, alpha.error) == ("openenv-alpha", "1.2.3", "ok", None)
    assert alpha.provides == {"env": ["a1", "a2"]}
    assert alpha.hooks == ["openenv_register_envs"]
    assert infos["beta"].provides == {"transport": ["bt"]}
    assert [e.loads for e in eps] == [1, 1]

    with_builtin = pm.plugins(include_builtins=True)
    assert with_builtin[0].name == "openenv" and with_builtin[0].builtin
    assert "openenv_choose_provider" in with_builtin[0].hooks


def test_entry_point_can_point_at_a_real_module(tmp_module) -> None:
    name = tmp_module("realplug_mod", """
        from openenv import hookimpl

        @hookimpl
        def openenv_register_rubrics(registry):
            registry.register("exact", "realplug_mod:Exact")
        """)
    pm = PluginManager(strict=True, entry_points=[make_entry_point("real", name)])
    assert pm.catalog.rubrics.get("exact").plugin == "real"
    assert pm.infos["real"].module == "realplug_mod"


def test_rebuilding_the_catalogue_does_not_duplicate_provides() -> None:
    pm = PluginManager(strict=True, entry_points=[make_entry_point("alpha", env_plugin("a1"))])
    assert pm.plugins()[0].provides == {"env": ["a1"]}
    pm.register(transport_plugin("late"), name="late")  # invalidates the catalogue
    infos = {i.name: i for i in pm.plugins()}
    assert infos["alpha"].provides == {"env": ["a1"]}
    assert infos["late"].provides == {"transport": ["late"]}


# -- broken plugins -------------------------------------------------------------------------------


def test_import_error_is_recorded_and_others_still_load() -> None:
    eps = [
        make_entry_point("broken", error=ImportError("No module named 'missing_sdk'"),
                         value="broken_pkg.plugin", dist="openenv-broken", version="9.9"),
        make_entry_point("good", env_plugin("g")),
    ]
    pm = PluginManager(strict=False, entry_points=eps)
    broken = pm.infos["broken"]
    assert broken.status == "error"
    assert broken.error == "import failed: ImportError: No module named 'missing_sdk'"
    assert (broken.dist, broken.version, broken.module) == ("openenv-broken", "9.9", "broken_pkg.plugin")
    assert pm.catalog.envs.names() == ["g"]


def test_import_error_raises_in_strict_mode() -> None:
    ep = make_entry_point("broken", error=ImportError("nope"))
    with pytest.raises(PluginError, match=r"Plugin 'broken' failed: import failed: ImportError: nope"):
        PluginManager(strict=True, entry_points=[ep])


def test_strict_mode_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    ep = make_entry_point("broken", error=ImportError("nope"))
    monkeypatch.setenv("OPENENV_STRICT_PLUGINS", "1")
    with pytest.raises(PluginError):
        PluginManager(entry_points=[ep])
    monkeypatch.setenv("OPENENV_STRICT_PLUGINS", "0")
    assert PluginManager(entry_points=[ep]).infos["broken"].status == "error"


def test_catalogue_hook_raising_is_recorded_and_its_entries_dropped() -> None:
    eps = [make_entry_point("shaky", raising_catalogue_plugin()), make_entry_point("ok", env_plugin("fine"))]
    pm = PluginManager(strict=False, entry_points=eps)
    # the env it registered before raising is dropped too: a failed plugin contributes nothing
    assert pm.catalog.envs.names() == ["fine"]
    shaky = pm.infos["shaky"]
    assert shaky.status == "error"
    assert shaky.error == "openenv_register_providers raised RuntimeError: provider table corrupt"
    assert shaky.provides == {}


def test_catalogue_hook_raising_raises_in_strict_mode() -> None:
    pm = PluginManager(strict=True, entry_points=[make_entry_point("shaky", raising_catalogue_plugin())])
    with pytest.raises(PluginError, match="Plugin 'shaky' failed: openenv_register_providers raised"):
        pm.catalog  # noqa: B018 - the catalogue is built lazily


def test_misspelled_hook_is_an_error_with_a_suggestion() -> None:
    pm = PluginManager(strict=False, entry_points=[make_entry_point("typo", misspelled_plugin())])
    info = pm.infos["typo"]
    assert info.status == "error"
    assert "unknown hook 'openenv_register_env'" in (info.error or "")
    assert "Did you mean 'openenv_register_envs'?" in (info.error or "")
    assert "never" not in pm.catalog.envs

    with pytest.raises(PluginError, match="Did you mean 'openenv_register_envs'"):
        PluginManager(strict=True, entry_points=[make_entry_point("typo", misspelled_plugin())])


def test_undecorated_hook_is_reported_instead_of_silently_ignored() -> None:
    def openenv_register_envs(registry: Registry) -> None:
        registry.register("ghost", "pkg:Ghost")

    pm = PluginManager(strict=False, entry_points=[
        make_entry_point("plain", make_plugin_module(openenv_register_envs))])
    assert pm.infos["plain"].status == "error"
    assert "not decorated with @openenv.hookimpl" in (pm.infos["plain"].error or "")


def test_marked_hook_without_prefix_is_unknown() -> None:
    @hookimpl
    def register_envs(registry: Registry) -> None:
        pass

    pm = PluginManager(strict=False, entry_points=[make_entry_point("np", make_plugin_module(register_envs))])
    assert "unknown hook 'register_envs'" in (pm.infos["np"].error or "")


def test_wrong_hook_arguments_are_an_invalid_plugin() -> None:
    @hookimpl
    def openenv_register_envs(reg: Registry) -> None:  # the spec's argument is `registry`
        pass

    pm = PluginManager(strict=False, entry_points=[
        make_entry_point("args", make_plugin_module(openenv_register_envs))])
    assert pm.infos["args"].status == "error"
    assert pm.infos["args"].error.startswith("invalid plugin:")  # type: ignore[union-attr]
    assert "reg" in pm.infos["args"].error  # type: ignore[operator]


def test_helpers_with_other_names_are_not_hooks() -> None:
    @hookimpl
    def openenv_register_envs(registry: Registry) -> None:
        registry.register("fine", "pkg:Fine")

    def helper() -> int:
        return 1

    module = make_plugin_module(openenv_register_envs, helper, openenv_version="1.0")
    pm = PluginManager(strict=True, entry_points=[make_entry_point("tidy", module)])
    assert pm.infos["tidy"].status == "ok"


def test_duplicate_plugin_name_is_listed_separately() -> None:
    eps = [make_entry_point("same", env_plugin("x"), dist="dist-one"),
           make_entry_point("same", env_plugin("y"), dist="dist-two")]
    pm = PluginManager(strict=False, entry_points=eps)
    infos = pm.plugins()
    assert [(i.name, i.dist, i.status) for i in infos] == [
        ("same", "dist-one", "ok"), ("same", "dist-two", "error")]
    assert "also provided by dist-one" in (infos[1].error or "")
    assert pm.catalog.envs.names() == ["x"]


# -- duplicate registrations ----------------------------------------------------------------------


def test_a_name_registered_by_two_plugins_is_served_by_neither() -> None:
    eps = [make_entry_point("first", env_plugin("clash", "only_first")),
           make_entry_point("second", env_plugin("clash"))]
    pm = PluginManager(strict=False, entry_points=eps)
    with pytest.raises(NameConflictError) as excinfo:
        pm.catalog.envs.get("clash")
    message = str(excinfo.value)
    assert "env 'clash' is registered by 2 plugins" in message
    assert "plugin 'first' (fake-first 0.0.0)" in message
    assert "plugin 'second' (fake-second 0.0.0)" in message
    assert "OPENENV_DISABLE_PLUGINS=" in message
    assert pm.catalog.envs.names() == ["only_first"]  # the rest of each plugin keeps working
    for name in ("first", "second"):
        assert pm.infos[name].status == "conflict"
        assert "env 'clash' is registered by 2 plugins" in (pm.infos[name].error or "")
    assert pm.infos["first"].to_json()["provides"] == {"env": ["clash", "only_first"]}

    strict = PluginManager(strict=True, entry_points=[
        make_entry_point("first", env_plugin("clash")), make_entry_point("second", env_plugin("clash"))])
    with pytest.raises(NameConflictError, match=r"env 'clash' is registered by 2 plugins"):
        strict.catalog  # noqa: B018


@pytest.mark.parametrize("order", [("official", "intruder"), ("intruder", "official")])
def test_discovery_order_never_decides_who_serves_a_name(order: tuple[str, str]) -> None:
    plugins = {"official": env_plugin("echo", module="official.env"),
               "intruder": env_plugin("echo", module="intruder.env")}
    pm = PluginManager(strict=False, entry_points=[make_entry_point(n, plugins[n]) for n in order])
    with pytest.raises(NameConflictError):
        pm.catalog.envs.get("echo")
    assert "echo" not in pm.catalog.envs


def test_disabling_one_of_two_plugins_resolves_the_conflict(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENENV_DISABLE_PLUGINS", "intruder")
    eps = [make_entry_point("official", env_plugin("echo", module="official.env")),
           make_entry_point("intruder", env_plugin("echo", module="intruder.env"))]
    pm = PluginManager(strict=True, entry_points=eps)
    assert pm.catalog.envs.get("echo").ref == "official.env:EchoEnv"
    assert pm.infos["official"].status == "ok" and pm.infos["intruder"].status == "disabled"
    assert pm.served_by("env", "echo") == (
        "env 'echo' is served by plugin 'official' (fake-official 0.0.0): official.env:EchoEnv")


def test_a_plugin_failing_later_gives_its_contested_name_back() -> None:
    @hookimpl
    def openenv_register_envs(registry: Registry) -> None:
        registry.register("echo", "intruder.env:EchoEnv")

    @hookimpl
    def openenv_register_providers(registry: Registry) -> None:
        raise RuntimeError("broken later")

    eps = [make_entry_point("official", env_plugin("echo", module="official.env")),
           make_entry_point("intruder", make_plugin_module(openenv_register_envs,
                                                           openenv_register_providers))]
    pm = PluginManager(strict=False, entry_points=eps)
    assert pm.catalog.envs.get("echo").plugin == "official"
    assert pm.infos["official"].status == "ok" and pm.infos["intruder"].status == "error"


def test_one_plugin_registering_a_name_twice_is_its_error() -> None:
    @hookimpl
    def openenv_register_envs(registry: Registry) -> None:
        registry.register("twice", "pkg:A")
        registry.register("twice", "pkg:B")

    pm = PluginManager(strict=False, entry_points=[
        make_entry_point("sloppy", make_plugin_module(openenv_register_envs))])
    assert pm.catalog.envs.names() == []
    assert pm.infos["sloppy"].status == "error"
    assert "registered twice by plugin 'sloppy'" in (pm.infos["sloppy"].error or "")


# -- switches -------------------------------------------------------------------------------------


def _three() -> list[FakeEntryPoint]:
    return [make_entry_point("a", env_plugin("ea")), make_entry_point("b", env_plugin("eb")),
            make_entry_point("c", env_plugin("ec"))]


def test_disable_plugins_skips_without_loading(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENENV_DISABLE_PLUGINS", " b , c")
    eps = _three()
    pm = PluginManager(strict=True, entry_points=eps)
    assert [e.loads for e in eps] == [1, 0, 0]
    assert {i.name: i.status for i in pm.plugins()} == {"a": "ok", "b": "disabled", "c": "disabled"}
    assert pm.catalog.envs.names() == ["ea"]
    assert pm.infos["b"].to_json()["provides"] == {}


def test_load_plugins_loads_only_those_and_builtins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENENV_LOAD_PLUGINS", "b")
    eps = _three()
    pm = PluginManager(strict=True, entry_points=eps)
    assert [e.loads for e in eps] == [0, 1, 0]
    assert {i.name: i.status for i in pm.plugins()} == {"a": "disabled", "b": "ok", "c": "disabled"}
    assert pm.catalog.envs.names() == ["eb"]
    assert pm.infos["openenv"].status == "ok"  # built-ins always load
    assert "openenv_choose_provider" in pm.infos["openenv"].hooks


def test_empty_load_list_loads_no_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENENV_LOAD_PLUGINS", "")
    eps = _three()
    PluginManager(strict=True, entry_points=eps)
    assert [e.loads for e in eps] == [0, 0, 0]


# -- decision hook --------------------------------------------------------------------------------


def provider_plugin(*names: str) -> object:
    @hookimpl
    def openenv_register_providers(registry: Registry) -> None:
        for n in names:
            registry.register(n, f"pkg.{n}:{n.title()}Provider")

    return make_plugin_module(openenv_register_providers)


def test_choose_provider_fallback(plugin_manager: PluginManager) -> None:
    plugin_manager.register(provider_plugin("local", "docker"), name="provs")
    assert plugin_manager.choose_provider("echo", None) == "local"
    assert plugin_manager.choose_provider("echo", "docker") == "docker"


def test_choose_provider_never_returns_a_provider_that_is_not_installed(
    plugin_manager: PluginManager,
) -> None:
    plugin_manager.register(provider_plugin("docker"), name="provs")
    with pytest.raises(UnknownNameError) as excinfo:
        plugin_manager.choose_provider("echo", "dokcer")
    message = str(excinfo.value)
    assert "Unknown provider 'dokcer'. Did you mean 'docker'? Installed providers: docker." in message
    assert "Choose an installed one with --provider." in message
    with pytest.raises(UnknownNameError, match=r"pip install openenvkit-provider-modal"):
        plugin_manager.choose_provider("echo", "modal")  # nothing close: say what to install
    with pytest.raises(UnknownNameError) as excinfo:
        plugin_manager.choose_provider("echo", None)  # the default, local, is not installed
    assert "the default is 'local'" in str(excinfo.value)
    assert "pip install openenvkit-provider-local" in str(excinfo.value)


def test_choose_provider_without_builtins_still_falls_back() -> None:
    pm = PluginManager(strict=True, entry_points=[
        make_entry_point("provs", provider_plugin("local", "modal"))], builtins=False)
    assert pm.choose_provider("echo", None) == "local"
    assert pm.choose_provider("echo", "modal") == "modal"
    with pytest.raises(UnknownNameError, match="Unknown provider 'docker'"):
        pm.choose_provider("echo", "docker")


def test_plugin_overriding_choose_provider_wins(plugin_manager: PluginManager) -> None:
    seen: list[tuple[str, str | None, list[str]]] = []

    @hookimpl
    def openenv_choose_provider(env: str, requested: str | None, available: list[str]) -> str | None:
        seen.append((env, requested, available))
        return "docker" if env == "heavy" else None  # None defers to the next implementation

    @hookimpl
    def openenv_register_providers(registry: Registry) -> None:
        registry.register("docker", "pkg.docker:DockerProvider")
        registry.register("local", "pkg.local:LocalProvider")
        registry.register("swarm", "pkg.swarm:SwarmProvider")

    plugin_manager.register(make_plugin_module(openenv_choose_provider, openenv_register_providers),
                            name="chooser")
    assert plugin_manager.choose_provider("heavy", None) == "docker"
    assert plugin_manager.choose_provider("light", None) == "local"
    assert plugin_manager.choose_provider("light", "swarm") == "swarm"
    assert seen[0] == ("heavy", None, ["docker", "local", "swarm"])


def test_a_plugin_choosing_an_uninstalled_provider_is_refused_by_name(
    plugin_manager: PluginManager,
) -> None:
    @hookimpl
    def openenv_choose_provider(env: str, requested: str | None, available: list[str]) -> str | None:
        return "modal"

    plugin_manager.register(provider_plugin("local"), name="provs")
    plugin_manager.register(make_plugin_module(openenv_choose_provider), name="cloudy")
    with pytest.raises(UnknownNameError) as excinfo:
        plugin_manager.choose_provider("echo", None)
    message = str(excinfo.value)
    assert "Unknown provider 'modal'" in message and "implemented by: cloudy" in message


# -- lifecycle hooks ------------------------------------------------------------------------------


def test_lifecycle_errors_are_logged_and_other_observers_still_run(
    plugin_manager: PluginManager, caplog: pytest.LogCaptureFixture
) -> None:
    received: list[SessionOpened] = []

    @hookimpl
    def openenv_session_opened(event: SessionOpened) -> None:
        raise RuntimeError("observer bug")

    good_calls: list[SessionClosed] = []

    @hookimpl
    def openenv_session_closed(event: SessionClosed) -> None:
        good_calls.append(event)

    @hookimpl(specname="openenv_session_opened")
    def record(event: SessionOpened) -> None:
        received.append(event)

    recorder = make_plugin_module(record)
    plugin_manager.register(make_plugin_module(openenv_session_opened, openenv_session_closed), name="buggy")
    plugin_manager.register(recorder, name="recorder")

    opened = SessionOpened(session_id="s1", env="echo", transport="ws", active_sessions=1)
    with caplog.at_level(logging.ERROR, logger="openenv.plugins"):
        plugin_manager.notify("openenv_session_opened", opened)  # must not raise
    assert received == [opened]
    assert any("openenv_session_opened" in r.getMessage() and "buggy" in r.getMessage()
               and r.exc_info and "observer bug" in str(r.exc_info[1]) for r in caplog.records)

    # The untyped form still reaches observers as the typed event.
    plugin_manager.notify("openenv_session_closed", {"session_id": "s1", "env": "echo",
                                                     "transport": "ws", "active_sessions": 0,
                                                     "reason": "client", "steps": 3})
    assert good_calls == [SessionClosed(session_id="s1", env="echo", transport="ws",
                                        active_sessions=0, reason="client", steps=3)]


def test_notify_without_observers_is_a_no_op(plugin_manager: PluginManager) -> None:
    plugin_manager.notify("openenv_server_started", ServerStarted(env="echo", host="127.0.0.1",
                                                                  port=1, mode="simulation"))


def test_notify_refuses_what_is_not_the_hooks_event(plugin_manager: PluginManager) -> None:
    with pytest.raises(TypeError, match="ServerStarted has no field"):
        plugin_manager.notify("openenv_server_started", {"env": "echo", "typo": 1})
    with pytest.raises(TypeError, match="not a lifecycle hook"):
        plugin_manager.notify("openenv_server_begun", {})


# -- the JSON row ---------------------------------------------------------------------------------


def test_plugin_info_json_has_every_documented_key_with_its_type() -> None:
    eps = [make_entry_point("alpha", env_plugin("a2", "a1"), dist="openenv-alpha", version="1.0"),
           make_entry_point("broken", error=ImportError("gone"))]
    pm = PluginManager(strict=False, entry_points=eps)
    rows = {i.name: i.to_json() for i in pm.plugins(include_builtins=True)}
    expected_types = {
        "name": str, "dist": (str, type(None)), "version": (str, type(None)),
        "module": (str, type(None)), "kinds": list, "provides": dict, "hooks": list,
        "status": str, "error": (str, type(None)), "builtin": bool,
    }
    for row in rows.values():
        assert set(row) == set(expected_types)
        for key, typ in expected_types.items():
            assert isinstance(row[key], typ), (key, row[key])
        assert row["status"] in {"ok", "error", "disabled"}
    assert rows["alpha"]["kinds"] == ["env"]
    assert rows["alpha"]["provides"] == {"env": ["a1", "a2"]}  # sorted
    assert rows["broken"]["error"] == "import failed: ImportError: gone"
    assert rows["openenv"]["builtin"] is True and rows["alpha"]["builtin"] is False
