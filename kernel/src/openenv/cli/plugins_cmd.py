"""``openenv plugins list``: what is installed, where it came from, and what failed to load.

A broken plugin never makes this command fail: it is listed with status ``error`` and its error
text, and the exit code is 0. In strict mode (``OPENENV_STRICT_PLUGINS=1``) the first broken
plugin raises ``PluginError`` instead, which the CLI reports as one ``error:`` line, exit code 1.
Listing imports each plugin's hook module only, never what its lazy references point at.

JSON schema (``openenv plugins list --json``), version ``openenv.plugins/1``::

    {
      "schema": "openenv.plugins/1",
      "plugins": [
        {
          "name":     str,               # entry-point name (what OPENENV_DISABLE_PLUGINS takes)
          "dist":     str | null,        # distribution that declares it, e.g. "openenvkit-transport-ws"
          "version":  str | null,        # that distribution's version
          "module":   str | null,        # the entry point's target, e.g. "openenv_transport_ws.plugin"
          "kinds":    [str],             # sorted kinds it registers: env, transport, provider, ...
          "provides": {kind: [str]},     # sorted names per kind; only kinds with names appear
          "hooks":    [str],             # sorted hook names it implements
          "status":   "ok" | "error" | "disabled" | "conflict",
          "error":    str | null,        # why it failed ("error") or which name it shares with
                                         # another plugin ("conflict"), else null
          "builtin":  bool               # the kernel's own plugin (listed only with --all)
        }
      ]
    }

A plugin with status ``conflict`` registers a name that another plugin registers too: that name is
served by neither (disable one with ``OPENENV_DISABLE_PLUGINS``); its other names work.

``announce_env`` is the one line ``openenv serve`` and ``openenv run`` print about the env they
serve (which plugin and distribution), or their one-line failure when the name is in conflict.

Plugins appear in discovery order (the kernel's built-in first when ``--all`` is given). New keys
may be added to a row without changing the schema version; removing or retyping one bumps it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from openenv.cli._output import console, print_json, table

if TYPE_CHECKING:
    from openenv.plugins import PluginInfo

__all__ = ["SCHEMA", "announce_env", "plugins_document", "register"]

#: Identifier of the JSON document's layout; bumped on any incompatible change.
SCHEMA = "openenv.plugins/1"

app = typer.Typer(help="Inspect installed plugins.", no_args_is_help=True)

_STATUS_STYLE = {"ok": "green", "error": "bold red", "conflict": "bold yellow", "disabled": "dim"}


def plugins_document(infos: list[PluginInfo]) -> dict[str, Any]:
    """The ``--json`` document for ``infos`` (see the module docstring for the schema)."""
    return {"schema": SCHEMA, "plugins": [info.to_json() for info in infos]}


@app.command("list")
def list_plugins(
    as_json: Annotated[bool, typer.Option("--json", help=f"Print JSON ({SCHEMA}).")] = False,
    include_all: Annotated[
        bool, typer.Option("--all", help="Include the kernel's built-in plugin.")
    ] = False,
) -> None:
    """List installed plugins with what each provides; broken ones show their error."""
    from openenv.plugins import get_plugin_manager

    infos = get_plugin_manager().plugins(include_builtins=include_all)
    if as_json:
        print_json(plugins_document(infos))
        return
    _print_table(infos)


def _print_table(infos: list[PluginInfo]) -> None:
    out = console()
    if not infos:
        out.print("No plugins installed. Install one, e.g. `pip install openenvkit-transport-ws`.")
        return
    counts = {status: sum(1 for i in infos if i.status == status) for status in _STATUS_STYLE}
    caption = ", ".join(f"{n} {status}" for status, n in counts.items() if n)
    t = table("Plugin", "Distribution", "Version", "Status", "Provides", caption=caption,
              identifiers=("Plugin", "Distribution", "Version", "Status"))
    for info in infos:
        row = info.to_json()
        if info.status in ("error", "conflict"):
            colour = "red" if info.status == "error" else "yellow"
            detail = f"[{colour}]{_escape(info.error or 'unknown error')}[/{colour}]"
        elif info.status == "disabled":
            detail = "disabled by OPENENV_DISABLE_PLUGINS / OPENENV_LOAD_PLUGINS"
        else:
            detail = "\n".join(f"{kind}: {', '.join(names)}" for kind, names in row["provides"].items())
            if not detail and row["hooks"]:
                detail = "hooks: " + ", ".join(row["hooks"])
        name = info.name + (" (built-in)" if info.builtin else "")
        status = f"[{_STATUS_STYLE[info.status]}]{info.status}[/]"
        t.add_row(_escape(name), _escape(info.dist or "-"), _escape(info.version or "-"), status,
                  detail, style="dim" if info.status == "disabled" else None)
    out.print(t)
    if counts["error"]:
        out.print(
            "Broken plugins are skipped. Fix or reinstall them, or hide one with "
            "OPENENV_DISABLE_PLUGINS=<name>."
        )
    if counts["conflict"]:
        out.print(
            "A name registered by two plugins is served by neither. Disable the one you do not "
            "want with OPENENV_DISABLE_PLUGINS=<name>."
        )


def announce_env(env: str, *, load: bool = False) -> None:
    """Print (stderr) which plugin serves the registered env ``env`` when it is not one of OpenEnv's
    own distributions (``PluginManager.served_by_news``); nothing for ``module:Obj``.

    Exits with code 2 and one line when the name is registered by two plugins. With ``load`` the
    entry is imported and its kind checked, and a wrong registration exits with code 1 and the fix
    (an import failure is left to the caller, which reports it with more context).
    """
    from openenv.cli._output import EXIT_ERROR, EXIT_USAGE, fail
    from openenv.errors import PluginError, UnknownNameError
    from openenv.kinds import KindError
    from openenv.plugins import get_plugin_manager
    from openenv.registry import NameConflictError

    pm = get_plugin_manager()
    try:
        line = pm.served_by_news("env", env)
        if load:
            pm.catalog.envs.load(env)
    except NameConflictError as exc:
        fail(str(exc), EXIT_USAGE)
    except KindError as exc:
        fail(str(exc), EXIT_ERROR)
    except (UnknownNameError, PluginError):
        return  # not a registered name, or an import error: the caller reports it
    if line is not None:
        typer.echo(line, err=True)


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def register(root: typer.Typer) -> None:
    """Mount ``openenv plugins`` on the root app."""
    root.add_typer(app, name="plugins")
