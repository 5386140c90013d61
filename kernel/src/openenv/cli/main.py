"""Entry point of the ``openenv`` command: builds the typer app from the command-group modules and
from commands registered by plugins (``openenv_register_commands``).

Start-up stays cheap: command-group modules import their heavy dependencies (the server, uvicorn)
inside the command functions, and a plugin's command is imported only when it is the command
being run. For every other command, plugin commands are listed from their registration (name and
description) without importing them. Help is plain text (no ``rich``, which costs a third of a
second to import).

``openenv --help`` loads neither the plugins nor typer: its text, and the plugin commands it
lists, come from a small cache keyed by metadata (``openenv.cli._cache``). On a miss (a plugin
was installed, upgraded or removed, or the kernel changed) the app is built the normal way once
and the cache rewritten; ``OPENENV_NO_CLI_CACHE=1`` always builds it. The cache only feeds the
root help: running a command always uses the live plugins.

``openenv --version`` prints the kernel's version (``-v``/``--verbose``: also every installed plugin
distribution, from metadata, nothing imported).

A ``PluginError`` (strict mode: ``OPENENV_STRICT_PLUGINS=1``) ends the command with one readable
``error:`` line and exit code 1, never a traceback.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from openenv.cli import _cache

if TYPE_CHECKING:
    import typer

__all__ = ["build_app", "main", "version_text"]

_ROOT_HELP = "OpenEnv: run, serve and inspect isolated environments for agentic RL."
#: `-h` as well as `--help`, on every command (click passes it down to sub-contexts).
_HELP_OPTIONS = ["-h", "--help"]

#: Kernel command-group modules, each exposing ``register(app: typer.Typer) -> None``.
_GROUPS = (
    "openenv.cli.plugins_cmd",
    "openenv.cli.envs_cmd",
    "openenv.cli.providers_cmd",
    "openenv.cli.serve_cmd",
    "openenv.cli.run_cmd",
    "openenv.cli.validate_cmd",
    "openenv.cli.init_cmd",
)


def build_app(argv: Sequence[str] | None = None) -> typer.Typer:
    """Build the root app.

    ``argv`` (the arguments after the program name) says which plugin command will run, so only
    that one is imported; ``None`` imports every plugin command (embedding, tests).
    """
    import typer

    from openenv.cli._root import root

    app = typer.Typer(
        name="openenv",
        help=_ROOT_HELP,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": _HELP_OPTIONS},
    )
    app.callback(invoke_without_command=True)(root)
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


def version_text(*, verbose: bool = False) -> str:
    """``openenv <version>``; ``verbose`` adds one line per plugin distribution (from metadata)."""
    from openenv import __version__

    lines = [f"openenv {__version__}"]
    if verbose:
        import importlib.metadata as md

        dists: dict[str, tuple[str, list[str]]] = {}
        for ep in md.entry_points(group="openenv"):
            dist = ep.dist
            key = dist.name if dist is not None else ep.value
            dists.setdefault(key, (dist.version if dist is not None else "?", []))[1].append(ep.name)
        if dists:
            lines.append("plugins:")
            width = max(len(name) for name in dists)
            for name in sorted(dists):
                dist_version, names = dists[name]
                lines.append(f"  {name:<{width}}  {dist_version:<10}  {', '.join(sorted(names))}")
        else:
            lines.append("plugins: none installed")
    return "\n".join(lines)


def _mount_plugin_commands(app: typer.Typer, invoked: str | None) -> None:
    """Add commands contributed by plugins; a broken one is reported, never fatal.

    ``invoked`` is the command about to run (``None``: load them all; ``""``: none, the root
    help). Other plugin commands get a placeholder that shows their description in ``--help``
    without importing them.
    """
    import typer

    from openenv.cli._output import warn

    taken = _taken_names(app)
    key = _cache.cache_key() if invoked == "" else None
    if key is not None:
        listed = _cache.cached_listing(key)
        if listed is not None:
            for name, help_text in listed:
                if name not in taken:
                    _mount_placeholder(app, name, help_text)
            return
    from openenv.plugins import get_plugin_manager

    entries = list(get_plugin_manager().catalog.commands)
    if key is not None:
        _cache.store(key, commands=[(e.name, e.description or f"Command from plugin '{e.plugin}'.")
                                    for e in entries])
    for entry in entries:
        if entry.name in taken:
            warn(f"command '{entry.name}' from plugin '{entry.plugin}' is ignored: the name is "
                 "already taken. Ask the plugin's author to rename it.")
            continue
        help_text = entry.description or f"Command from plugin '{entry.plugin}'."
        if invoked is not None and entry.name != invoked:
            _mount_placeholder(app, entry.name, help_text)
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


def _mount_placeholder(app: typer.Typer, name: str, help_text: str) -> None:
    """A stand-in listed in ``--help``; ``build_app`` mounts the real command when it is the one
    being run, so this body only runs if the app was built for other arguments."""
    _mount_failing(app, name, help_text,
                   f"command '{name}' was not loaded: build the app with build_app(None) "
                   "or with the arguments it will run.")


def _mount_failing(app: typer.Typer, name: str, help_text: str, message: str) -> None:
    """Mount ``name`` as a command that accepts any arguments and fails with ``message``."""

    def failing() -> None:
        from openenv.cli._output import fail

        fail(message)

    app.command(name=name, help=help_text, add_help_option=False,
                context_settings={"allow_extra_args": True, "ignore_unknown_options": True})(failing)


def _root_help(key: str | None) -> str:
    """The root help text as ``openenv --help`` prints it (recorded in the cache under ``key``)."""
    import typer.main

    command = typer.main.get_command(build_app([]))
    width = _cache.help_width()
    with command.context_class(command, info_name="openenv",  # typer's own click
                               help_option_names=_HELP_OPTIONS) as ctx:
        text = command.get_help(ctx) + "\n"
    if key is not None:
        _cache.store(key, help_text=(width, text))
    return text


def main(argv: Sequence[str] | None = None) -> None:
    """Run the CLI with ``argv`` (default: ``sys.argv[1:]``); exits like any console script."""
    from openenv.errors import PluginError

    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args and "--version" in args and set(args) <= {"--version", "-v", "--verbose"}:
            print(version_text(verbose="-v" in args or "--verbose" in args))  # no typer needed
            return
        if args in (["--help"], ["-h"]):
            key = _cache.cache_key()
            text = _cache.cached_help(key, _cache.help_width()) if key is not None else None
            sys.stdout.write(text if text is not None else _root_help(key))
            return
        app = build_app(args)
        app(args=args, prog_name="openenv")
    except PluginError as exc:
        strict = os.environ.get("OPENENV_STRICT_PLUGINS", "").lower() in {"1", "true", "yes"}
        print(f"error: {exc}", file=sys.stderr)
        if strict:
            print("(strict mode is on: OPENENV_STRICT_PLUGINS is set. Unset it to skip broken plugins "
                  "and see them in `openenv plugins list`.)", file=sys.stderr)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
