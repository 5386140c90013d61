"""Entry point of the ``openenv`` command: builds the typer app from the command-group modules and
from commands registered by plugins (``openenv_register_commands``)."""

from __future__ import annotations

import importlib
import sys

import typer

__all__ = ["build_app", "main"]

#: Kernel command-group modules, each exposing ``register(app: typer.Typer) -> None``.
_GROUPS = (
    "openenv.cli.plugins_cmd",
    "openenv.cli.envs_cmd",
    "openenv.cli.providers_cmd",
    "openenv.cli.serve_cmd",
    "openenv.cli.run_cmd",
)


def build_app() -> typer.Typer:
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
    _mount_plugin_commands(app)
    return app


def _mount_plugin_commands(app: typer.Typer) -> None:
    """Add commands contributed by plugins; a broken one is reported, never fatal."""
    from openenv.plugins import get_plugin_manager

    pm = get_plugin_manager()
    for entry in pm.catalog.commands:
        try:
            obj = entry.load()
        except Exception as exc:  # shown by `openenv plugins list` too
            print(f"warning: command '{entry.name}' from plugin '{entry.plugin}' failed to load: {exc}",
                  file=sys.stderr)
            continue
        if isinstance(obj, typer.Typer):
            app.add_typer(obj, name=entry.name, help=entry.description or None)
        else:
            app.command(name=entry.name, help=entry.description or None)(obj)


def main() -> None:
    build_app()()


if __name__ == "__main__":
    main()
