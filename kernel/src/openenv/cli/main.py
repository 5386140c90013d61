"""Entry point of the ``openenv`` command: builds the typer app from the command-group modules and
from commands registered by plugins (``openenv_register_commands``).

Start-up stays cheap: command-group modules import their heavy dependencies (the server, uvicorn)
inside the command functions, and a plugin's command is imported only when it is the command
being run. For ``--help`` and every other command, plugin commands are listed from their
registration (name and description) without importing them.

A ``PluginError`` (strict mode: ``OPENENV_STRICT_PLUGINS=1``) ends the command with one readable
``error:`` line and exit code 1, never a traceback.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from openenv.registry import Entry

__all__ = ["build_app", "main"]

#: Kernel command-group modules, each exposing ``register(app: typer.Typer) -> None``.
_GROUPS = (
    "openenv.cli.plugins_cmd",
    "openenv.cli.envs_cmd",
    "openenv.cli.providers_cmd",
    "openenv.cli.serve_cmd",
    "openenv.cli.run_cmd",
)


def build_app(argv: Sequence[str] | None = None) -> typer.Typer:
    """Build the root app.

    ``argv`` (the arguments after the program name) says which plugin command will run, so only
    that one is imported; ``None`` imports every plugin command (embedding, tests).
    """
    app = typer.Typer(
        name="openenv",
        help="OpenEnv: run, serve and inspect isolated environments for agentic RL.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    for module_name in _GROUPS:
        module = importlib.import_module(module_name)
        module.register(app)
    _mount_plugin_commands(app, None if argv is None else _command_name(argv))
    return app


def _command_name(argv: Sequence[str]) -> str:
    """The sub-command named on the command line ("" when there is none, e.g. ``--help``)."""
    return next((arg for arg in argv if not arg.startswith("-")), "")


def _taken_names(app: typer.Typer) -> set[str]:
    names = {info.name for info in app.registered_groups if info.name}
    names |= {info.name for info in app.registered_commands if info.name}
    return names


def _mount_plugin_commands(app: typer.Typer, invoked: str | None) -> None:
    """Add commands contributed by plugins; a broken one is reported, never fatal.

    ``invoked`` is the command about to run (``None``: load them all). Other plugin commands get
    a placeholder that shows their description in ``--help`` without importing them.
    """
    from openenv.cli._output import warn
    from openenv.plugins import get_plugin_manager

    taken = _taken_names(app)
    for entry in get_plugin_manager().catalog.commands:
        if entry.name in taken:
            warn(f"command '{entry.name}' from plugin '{entry.plugin}' is ignored: the name is "
                 "already taken. Ask the plugin's author to rename it.")
            continue
        help_text = entry.description or f"Command from plugin '{entry.plugin}'."
        if invoked is not None and entry.name != invoked:
            _mount_placeholder(app, entry, help_text)
            continue
        try:
            obj = entry.load()
        except Exception as exc:  # shown by `openenv plugins list` too
            if invoked is not None:  # the user asked for exactly this command: fail when run
                _mount_failing(app, entry.name, help_text, str(exc))
            else:
                warn(f"command '{entry.name}' from plugin '{entry.plugin}' failed to load: {exc}")
            continue
        if isinstance(obj, typer.Typer):
            app.add_typer(obj, name=entry.name, help=help_text)
        else:
            app.command(name=entry.name, help=help_text)(obj)


def _mount_placeholder(app: typer.Typer, entry: Entry, help_text: str) -> None:
    """A stand-in listed in ``--help``; ``build_app`` mounts the real command when it is the one
    being run, so this body only runs if the app was built for other arguments."""
    _mount_failing(app, entry.name, help_text,
                   f"command '{entry.name}' was not loaded: build the app with build_app(None) "
                   "or with the arguments it will run.")


def _mount_failing(app: typer.Typer, name: str, help_text: str, message: str) -> None:
    """Mount ``name`` as a command that accepts any arguments and fails with ``message``."""

    def failing() -> None:
        from openenv.cli._output import fail

        fail(message)

    app.command(name=name, help=help_text, add_help_option=False,
                context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(failing)


def main(argv: Sequence[str] | None = None) -> None:
    """Run the CLI with ``argv`` (default: ``sys.argv[1:]``); exits like any console script."""
    from openenv.errors import PluginError

    args = list(sys.argv[1:] if argv is None else argv)
    try:
        app = build_app(args)
        app(args=args, prog_name="openenv")
    except PluginError as exc:
        strict = os.environ.get("OPENENV_STRICT_PLUGINS", "").lower() in {"1", "true", "yes"}
        typer.echo(f"error: {exc}", err=True)
        if strict:
            typer.echo("(strict mode is on: OPENENV_STRICT_PLUGINS is set. Unset it to skip "
                       "broken plugins and see them in `openenv plugins list`.)", err=True)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
