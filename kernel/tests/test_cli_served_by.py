"""``openenv serve``/``run`` say which plugin serves the env, and refuse a contested name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from openenv import hookimpl
from openenv.plugins import PluginManager
from openenv.registry import EnvRegistry
from openenv.testing import make_entry_point, make_plugin_module, served_cli
from openenv.testing.fakes import make_catalogue_plugin


def env_plugin(name: str, ref: str) -> object:
    @hookimpl
    def openenv_register_envs(registry: EnvRegistry) -> None:
        registry.register(name, ref)

    return make_plugin_module(openenv_register_envs)


def contested() -> PluginManager:
    return PluginManager(strict=False, entry_points=[
        make_entry_point("echo", env_plugin("echo", "openenv_env_echo.env:EchoEnv"),
                         dist="openenvkit-env-echo", version="0.1.0"),
        make_entry_point("squatter", make_catalogue_plugin(
            envs={"echo": "squatter_pkg.env:Echo", "other": "squatter_pkg.env:Other"}),
            dist="squatter", version="6.6.6")])


def test_envs_list_shows_the_contested_name_and_the_rest(run_cli) -> None:
    doc = json.loads(run_cli(contested(), "envs", "list", "--json").stdout)
    assert [row["name"] for row in doc["envs"]] == ["other"]
    assert [(c["name"], c["plugins"]) for c in doc["conflicts"]] == [("echo", ["echo", "squatter"])]
    table = run_cli(contested(), "envs", "list")
    assert table.exit_code == 0
    assert "env 'echo' is registered by 2 plugins" in table.stdout
    listing = run_cli(contested(), "plugins", "list")
    assert listing.exit_code == 0 and listing.stdout.count("conflict") >= 2


@pytest.mark.parametrize("command", ["serve", "run"])
def test_a_contested_env_name_is_refused_in_one_line(run_cli, command: str) -> None:
    result = run_cli(contested(), command, "echo")
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines == [
        "error: env 'echo' is registered by 2 plugins: plugin 'echo' (openenvkit-env-echo 0.1.0) and "
        "plugin 'squatter' (squatter 6.6.6). OpenEnv never picks one silently: disable the one you "
        "do not want (OPENENV_DISABLE_PLUGINS=echo or OPENENV_DISABLE_PLUGINS=squatter) or "
        "uninstall it."]


@pytest.mark.requires_plugins("transport-ws")
def test_serve_refuses_a_registration_of_the_wrong_kind_without_a_traceback(run_cli) -> None:
    pm = PluginManager(strict=True, entry_points=[
        make_entry_point("typo", env_plugin("echo_action", "openenv_env_echo.models:EchoAction"))])
    result = run_cli(pm, "serve", "echo_action")
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert "That is an Action model, not the env" in result.output


@pytest.mark.requires_plugins("transport-ws")
def test_serve_prints_no_served_by_line_for_openenv_s_own_env(tmp_path: Path) -> None:
    """A note before every command that OpenEnv's own echo plugin serves `echo` says nothing new;
    the line is kept for a plugin from elsewhere (test_run_says_which_plugin_provides_the_provider)."""
    # The kit's `openenv serve` child: waits (bounded) for the ready file, stops it on the way out.
    with served_cli("echo", tmp_path=tmp_path, log_level="warning") as url:
        assert url.startswith("http://127.0.0.1:")
    (log,) = tmp_path.glob("serve-echo-*/server.log")  # the child's stderr
    assert [line for line in log.read_text().splitlines() if "is served by" in line] == []


def test_only_a_plugin_from_outside_openenv_is_news() -> None:
    outside = PluginManager(strict=True, entry_points=[
        make_entry_point("thirdparty", env_plugin("echo3", "openenv_env_echo.env:EchoEnv"), dist="acme-envs",
                         version="2.0")])
    assert outside.served_by_news("env", "echo3") == (
        "env 'echo3' is served by plugin 'thirdparty' (acme-envs 2.0): openenv_env_echo.env:EchoEnv")
    own = PluginManager(strict=True, entry_points=[
        make_entry_point("echo", env_plugin("echo", "openenv_env_echo.env:EchoEnv"), dist="openenvkit-env-echo",
                         version="0.1.0")])
    assert own.served_by_news("env", "echo") is None
    assert own.served_by("env", "echo").startswith("env 'echo' is served by plugin 'echo' (openenvkit-env-echo")
