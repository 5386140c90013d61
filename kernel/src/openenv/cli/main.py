"""Entry point of the ``openenv`` command: builds the typer app from the command-group modules and
from commands registered by plugins (``openenv_register_commands``).

Start-up stays cheap: command-group modules import their heavy dependencies (the server, uvicorn)
inside the command functions, and a plugin's command is imported only when it is the command
being run. For every other command, plugin commands are listed from their registration (name and
description) without importing them. Help is plain text (no ``rich``, which costs a third of a
second to import).

``openenv --help`` (or no arguments) does not even load the plugins: the plugin commands it lists
come from a small cache (``openenv_cli.json`` in ``$OPENENV_CACHE_DIR``, else
``$XDG_CACHE_HOME/openenv`` or ``~/.cache/openenv``) keyed by the installed plugin distributions
(entry-point metadata: names, versions, install records) and the plugin-selection variables. When
the key does not match (a plugin was installed, upgraded or removed) the plugins are loaded once
and the cache rewritten; ``OPENENV_NO_CLI_CACHE=1`` always loads them. The cache only feeds that
listing: running a command always uses the live plugins.

``openenv --version`` prints the kernel's version (``-v``/``--verbose``: also every installed plugin
distribution, from metadata, nothing imported).

A ``PluginError`` (strict mode: ``OPENENV_STRICT_PLUGINS=1``) ends the command with one readable
``error:`` line and exit code 1, never a traceback.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated

import typer

__all__ = ["build_app", "main", "version_text"]

#: Environment variables that change which plugins load (so they are part of the cache key).
_PLUGIN_VARS = ("OPENENV_DISABLE_PLUGINS", "OPENENV_LOAD_PLUGINS", "OPENENV_STRICT_PLUGINS")
_CACHE_FILE = "openenv_cli.json"
_CACHE_SCHEMA = "openenv.cli-commands/1"

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
        rich_markup_mode=None,
    )
    app.callback(invoke_without_command=True)(_root)
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


def _root(
    ctx: typer.Context,
    version: Annotated[bool, typer.Option("--version", help="Print the version and exit.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v",
                                          help="With --version: list the plugin distributions.")] = False,
) -> None:
    if version:
        typer.echo(version_text(verbose=verbose))
        raise typer.Exit()
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())
        raise typer.Exit()


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
    from openenv.cli._output import warn

    taken = _taken_names(app)
    key = _cache_key() if invoked == "" else None
    if key is not None:
        listed = _cached_listing(key)
        if listed is not None:
            for name, help_text in listed:
                if name not in taken:
                    _mount_placeholder(app, name, help_text)
            return
    from openenv.plugins import get_plugin_manager

    entries = list(get_plugin_manager().catalog.commands)
    if key is not None:
        _write_listing(key, [(e.name, e.description or f"Command from plugin '{e.plugin}'.") for e in entries])
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


# -- the root help's listing cache ----------------------------------------------------------------


def _cache_path() -> Path:
    base = os.environ.get("OPENENV_CACHE_DIR")
    if base:
        return Path(base) / _CACHE_FILE
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "openenv" / _CACHE_FILE


def _cache_key() -> str | None:
    """What the plugin commands depend on, from metadata only; ``None``: do not use the cache."""
    import openenv.plugins as plugins_module

    if os.environ.get("OPENENV_NO_CLI_CACHE", "").lower() in {"1", "true", "yes"}:
        return None
    if plugins_module._GLOBAL is not None:  # a plugin manager is in use (embedding, tests): ask it
        return None
    import importlib.metadata as md

    from openenv import __version__

    parts: list[str] = [__version__, *(f"{v}={os.environ.get(v, '')}" for v in _PLUGIN_VARS)]
    for ep in md.entry_points(group=plugins_module.ENTRY_POINT_GROUP):
        dist = ep.dist
        record = ""
        if dist is not None:
            where = getattr(dist, "_path", None)  # the .dist-info folder: rewritten on (re)install
            try:
                record = str(os.stat(where).st_mtime_ns) if where is not None else ""
            except OSError:
                record = ""
        parts.append("|".join((ep.name, ep.value, dist.name if dist else "", dist.version if dist else "",
                               record)))
    return hashlib.sha256("\n".join(sorted(parts)).encode()).hexdigest()


def _cached_listing(key: str) -> list[tuple[str, str]] | None:
    """The plugin commands (name, help) recorded under ``key``, or ``None`` on a miss."""
    try:
        doc = json.loads(_cache_path().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("schema") != _CACHE_SCHEMA or doc.get("key") != key:
        return None
    rows = doc.get("commands")
    if not isinstance(rows, list):
        return None
    return [(str(r[0]), str(r[1])) for r in rows if isinstance(r, list) and len(r) == 2]


def _write_listing(key: str, rows: list[tuple[str, str]]) -> None:
    """Record ``rows`` under ``key``; a cache that cannot be written is simply not used."""
    path = _cache_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"schema": _CACHE_SCHEMA, "key": key, "commands": rows}), encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass


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


def main(argv: Sequence[str] | None = None) -> None:
    """Run the CLI with ``argv`` (default: ``sys.argv[1:]``); exits like any console script."""
    from openenv.errors import PluginError

    args = list(sys.argv[1:] if argv is None else argv)
    if args and "--version" in args and set(args) <= {"--version", "-v", "--verbose"}:
        print(version_text(verbose="-v" in args or "--verbose" in args))  # no typer needed
        return
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
