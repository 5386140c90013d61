"""``openenv providers``: list registered providers, and see or clean up what they started.

* ``list`` reads the registry only: no provider module (and so no cloud SDK) is imported.
* ``ps`` asks each provider (or the one named by ``--provider``) for the servers it started for
  this owner (``--all-owners``: for every owner): ``Provider.ps``.
* ``gc`` asks each provider (or one) to remove resources whose owner process is gone:
  ``Provider.gc``, and prints what was removed.

An unknown ``--provider`` name exits with code 2 and a "did you mean …?" hint. A provider whose
optional engine is absent (it raises ``openenv.interfaces.EngineUnavailable``, e.g. no Docker
daemon), or that is not configured on this machine (it raises ``ConfigError``, e.g. no kubeconfig or
cloud credentials), is reported in one line on stderr and does not change the exit code: nothing of
it can be running. A provider that fails to load or raises anything else is reported on stderr, the others
still run, and the exit code is 1.

JSON schemas: ``list --json`` prints ``{"schema": "openenv.providers/1", "providers": [{"name",
"plugin", "ref", "description", "extra"}]}``; ``ps --json`` and ``gc --json`` print ``{"schema":
"openenv.provider-handles/1", "handles": [{"provider", "id", "owner", "base_url", "status",
"env"}], "errors": [{"provider", "error"}], "unavailable": [{"provider", "reason", "kind"}]}``
(``kind``: ``engine`` or ``config``; for ``gc``,
``handles`` are the removed ones).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Annotated, Any

import typer

from openenv.cli._output import EXIT_ERROR, EXIT_USAGE, console, fail, print_json, table

if TYPE_CHECKING:
    from openenv.interfaces import HandleInfo, Provider
    from openenv.registry import Entry

__all__ = ["HANDLES_SCHEMA", "SCHEMA", "register"]

SCHEMA = "openenv.providers/1"
HANDLES_SCHEMA = "openenv.provider-handles/1"

app = typer.Typer(help="Inspect providers and the servers they started.", no_args_is_help=True)

_JSON = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
_PROVIDER = Annotated[
    str | None, typer.Option("--provider", "-p", help="Only this provider (default: every one).")
]


@app.command("list")
def list_providers(as_json: _JSON = False) -> None:
    """List registered providers (without importing them)."""
    from openenv.plugins import get_plugin_manager

    rows = [_provider_row(e) for e in get_plugin_manager().catalog.providers]
    if as_json:
        print_json({"schema": SCHEMA, "providers": rows})
        return
    if not rows:
        console().print("No providers registered. Install one, e.g. "
                        "`pip install openenvkit-provider-local`.")
        return
    t = table("Provider", "Plugin", "Reference", "Description", identifiers=("Provider", "Plugin", "Reference"),
              optional=("Plugin", "Reference"))
    for row in rows:
        t.add_row(*(_escape(row[k] or "-") for k in ("name", "plugin", "ref", "description")))
    console().print(t)


@app.command("ps")
def ps(
    provider: _PROVIDER = None,
    all_owners: Annotated[
        bool, typer.Option("--all-owners", help="Include servers started by other processes.")
    ] = False,
    as_json: _JSON = False,
) -> None:
    """Show the env servers that providers started (for this owner unless --all-owners)."""
    result = _run_each(provider, lambda p: p.ps(all_owners=all_owners), "ps")
    _report(result, as_json, empty="No servers running.", title=None, named=provider is not None, verb="ps")


@app.command("gc")
def gc(provider: _PROVIDER = None, as_json: _JSON = False) -> None:
    """Remove resources whose owner process is gone; print what was removed."""
    result = _run_each(provider, lambda p: p.gc(), "gc")
    _report(result, as_json, empty="Nothing to remove.", title="Removed", named=provider is not None, verb="gc")


def _provider_row(entry: Entry) -> dict[str, Any]:
    extra = {k: v for k, v in entry.to_json().items()
             if k not in {"name", "ref", "plugin", "description"}}
    return {"name": entry.name, "plugin": entry.plugin, "ref": entry.ref_text,
            "description": entry.description, "extra": extra}


def _selected(name: str | None) -> list[Entry]:
    """Entries to act on; an unknown name exits with code 2 and a suggestion."""
    from openenv.errors import UnknownNameError
    from openenv.plugins import get_plugin_manager

    registry = get_plugin_manager().catalog.providers
    if name is None:
        return list(registry)
    try:
        return [registry.get(name)]
    except UnknownNameError as exc:
        fail(str(exc), EXIT_USAGE)


def _instantiate(entry: Entry) -> Provider:
    """Load a provider's class (checked to be a ``Provider`` subclass by the registry) and build it."""
    provider: Provider = entry.load()()
    return provider


@dataclasses.dataclass
class _Results:
    handles: list[HandleInfo] = dataclasses.field(default_factory=list)
    errors: list[dict[str, str]] = dataclasses.field(default_factory=list)
    unavailable: list[dict[str, str]] = dataclasses.field(default_factory=list)


def _run_each(name: str | None, action: Any, verb: str) -> _Results:
    """Run ``action(provider)`` on each selected provider, collecting handles and problems."""
    from openenv.errors import ConfigError
    from openenv.interfaces import EngineUnavailable

    result = _Results()
    for entry in _selected(name):
        try:
            result.handles.extend(action(_instantiate(entry)))
        except EngineUnavailable as exc:  # optional engine absent: nothing of it can run
            result.unavailable.append({"provider": entry.name, "reason": _one_line(str(exc)), "kind": "engine"})
        except ConfigError as exc:  # not set up here (no kubeconfig, no credentials): nothing of it runs
            result.unavailable.append({"provider": entry.name, "reason": _one_line(str(exc)), "kind": "config"})
        except Exception as exc:  # one broken provider must not hide the others' servers
            result.errors.append({"provider": entry.name,
                                  "error": f"{verb} failed: {type(exc).__name__}: {exc}"})
    return result


def _one_line(text: str) -> str:
    return " ".join(text.split()) or "engine not available"


def _report(result: _Results, as_json: bool, *, empty: str, title: str | None, named: bool, verb: str) -> None:
    handles, errors = result.handles, result.errors
    if as_json:
        print_json({"schema": HANDLES_SCHEMA, "handles": [_handle_row(h) for h in handles],
                    "errors": errors, "unavailable": result.unavailable})
    elif handles:
        t = table("Provider", "Id", "Env", "Status", "URL", "Owner", title=title,
                  identifiers=("Provider", "Id", "Env", "URL"))
        for row in map(_handle_row, handles):
            t.add_row(*(_escape(str(row.get(k) or "-"))
                        for k in ("provider", "id", "env", "status", "base_url", "owner")))
        console().print(t)
    else:
        console().print(empty)
    # An absent engine (a local Docker that is down) is news; a cloud without credentials here is
    # the usual case when every provider is asked, so those share one line unless one was named.
    unset = [item for item in result.unavailable if item["kind"] == "config" and not named]
    for item in result.unavailable:
        if item in unset:
            continue
        why = "its engine is not available" if item["kind"] == "engine" else "it is not configured here"
        typer.echo(f"note: provider '{item['provider']}' skipped, {why}: {item['reason']}", err=True)
    if unset:
        names = ", ".join(item["provider"] for item in unset)
        typer.echo(f"note: skipped {len(unset)} provider(s) not set up here ({names}); "
                   f"`openenv providers {verb} --provider NAME` says what one needs.", err=True)
    for err in errors:
        typer.echo(f"error: provider '{err['provider']}': {err['error']}", err=True)
    if errors:
        raise typer.Exit(EXIT_ERROR)


def _handle_row(handle: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(handle) and not isinstance(handle, type):
        return dataclasses.asdict(handle)
    return {k: getattr(handle, k, None) for k in ("provider", "id", "owner", "base_url", "status", "env")}


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def register(root: typer.Typer) -> None:
    """Mount ``openenv providers`` on the root app."""
    root.add_typer(app, name="providers")
