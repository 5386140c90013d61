"""The root app: kernel command groups, plugin commands (loaded only when run), name clashes."""

from __future__ import annotations

import sys

import pytest

from openenv import hookimpl
from openenv.plugins import PluginManager
from openenv.registry import Registry
from openenv.testing import make_entry_point, make_plugin_module

COMMANDS_SOURCE = """
import typer

def hello(name: str = typer.Argument("world"), shout: bool = False) -> None:
    text = f"hello {name}"
    typer.echo(text.upper() if shout else text)

tools = typer.Typer()

@tools.command()
def count(n: int) -> None:
    typer.echo(" ".join(str(i) for i in range(n)))

@tools.command()
def version() -> None:
    typer.echo("tools 1.0")
"""


@pytest.fixture
def command_manager(tmp_module):  # type: ignore[no-untyped-def]
    mod = tmp_module("clicmd_plugin_cmds", COMMANDS_SOURCE)
    broken = tmp_module("clicmd_broken_cmds", "raise ImportError('needs extra deps')\n")

    @hookimpl
    def openenv_register_commands(registry: Registry) -> None:
        registry.register("hello", f"{mod}:hello", description="Say hello.")
        registry.register("tools", f"{mod}:tools", description="Handy tools.")
        registry.register("needy", f"{broken}:app", description="Needs extras.")
        registry.register("plugins", f"{mod}:hello", description="Clashes with the kernel.")

    pm = PluginManager(strict=True, entry_points=[
        make_entry_point("cmds", make_plugin_module(openenv_register_commands))])
    return pm, mod


def test_help_lists_kernel_and_plugin_commands_without_importing_them(
    run_cli, command_manager, capsys: pytest.CaptureFixture[str]
) -> None:
    pm, mod = command_manager
    result = run_cli(pm, "--help")
    assert result.exit_code == 0, result.output
    for name in ("plugins", "envs", "providers", "hello", "tools", "needy"):
        assert f" {name} " in result.stdout, name
    assert "Say hello." in result.stdout and "Handy tools." in result.stdout
    assert mod not in sys.modules
    # printed while the app is built, before the runner captures output
    assert "warning: command 'plugins' from plugin 'cmds' is ignored" in capsys.readouterr().err


def test_plugin_function_command_runs(run_cli, command_manager) -> None:
    pm, mod = command_manager
    result = run_cli(pm, "hello", "there", "--shout")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "HELLO THERE"
    assert mod in sys.modules


def test_plugin_typer_group_runs(run_cli, command_manager) -> None:
    pm, _ = command_manager
    result = run_cli(pm, "tools", "count", "3")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == "0 1 2"


def test_broken_plugin_command_fails_only_when_run(run_cli, command_manager) -> None:
    pm, _ = command_manager
    assert run_cli(pm, "envs", "list").exit_code == 0
    result = run_cli(pm, "needy")
    assert result.exit_code == 1
    assert "command 'needy' (from plugin 'cmds') could not be loaded" in result.output
    assert "needs extra deps" in result.output


def test_build_app_without_argv_loads_every_command(use_plugin_manager, command_manager) -> None:
    from typer.testing import CliRunner

    from openenv.cli.main import build_app

    pm, mod = command_manager
    use_plugin_manager(pm)
    app = build_app()  # embedding: every plugin command is real (the broken one is skipped)
    assert mod in sys.modules
    result = CliRunner().invoke(app, ["tools", "version"])
    assert result.exit_code == 0 and result.stdout.strip() == "tools 1.0"


def test_kernel_command_wins_a_name_clash(run_cli, command_manager) -> None:
    pm, _ = command_manager
    result = run_cli(pm, "plugins", "list", "--json")
    assert result.exit_code == 0
    assert '"schema": "openenv.plugins/1"' in result.stdout


def test_no_arguments_shows_help(run_cli) -> None:
    result = run_cli(PluginManager(strict=True, entry_points=[]))
    assert "Usage:" in result.output and "plugins" in result.output


def test_unknown_command_is_a_usage_error(run_cli) -> None:
    result = run_cli(PluginManager(strict=True, entry_points=[]), "plugin", "list")
    assert result.exit_code == 2
    assert "plugin" in result.output
