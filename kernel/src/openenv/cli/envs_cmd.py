"""``openenv envs list``: the registered environments, with their ``openenv.yaml`` data.

Listing never imports an env's module: it reads the registry (lazy references) and, when a
registration carries a ``manifest=`` extra, that manifest file. A manifest that cannot be read is
reported on its row (``manifest_error``), never fatal.

JSON schema (``openenv envs list --json``), version ``openenv.envs/1``::

    {
      "schema": "openenv.envs/1",
      "envs": [
        {
          "name":           str,          # registry name (what `openenv serve NAME` takes)
          "plugin":         str,          # plugin that registered it
          "ref":            str,          # lazy "module:Object" reference (not imported)
          "description":    str,          # registration's description, else the manifest's, else ""
          "manifest_path":  str | null,   # resolved path of openenv.yaml, if one was registered
          "manifest":       object|null,  # the validated manifest (openenv.manifest.Manifest)
          "manifest_error": str | null,   # why the manifest could not be read, else null
          "extra":          object        # other JSON-able registration extras (version, tags...)
        }
      ],
      "conflicts": [                    # names registered by several plugins: served by none
        {"name": str, "plugins": [str], "error": str}
      ]
    }
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from openenv.cli._output import console, print_json, table

if TYPE_CHECKING:
    from openenv.plugins import PluginManager
    from openenv.registry import Entry

__all__ = ["SCHEMA", "env_row", "envs_document", "register"]

SCHEMA = "openenv.envs/1"

app = typer.Typer(help="Inspect registered environments.", no_args_is_help=True)


def env_row(entry: Entry, pm: PluginManager) -> dict[str, Any]:
    """One env's JSON row (reads its manifest if it has one; imports nothing)."""
    from openenv.manifest import ManifestError, load_manifest, locate_manifest

    extra = {k: v for k, v in entry.to_json().items()
             if k not in {"name", "ref", "plugin", "description", "manifest"}}
    row: dict[str, Any] = {
        "name": entry.name,
        "plugin": entry.plugin,
        "ref": entry.ref_text,
        "description": entry.description,
        "manifest_path": None,
        "manifest": None,
        "manifest_error": None,
        "extra": extra,
    }
    raw = getattr(entry, "manifest", None) or entry.extra.get("manifest")
    if raw is None:
        return row
    try:
        path = locate_manifest(raw, relative_to=_plugin_folder(pm, entry.plugin))
        row["manifest_path"] = str(path)
        manifest = load_manifest(path)
    except (ManifestError, TypeError) as exc:
        row["manifest_error"] = str(exc)
        return row
    row["manifest"] = manifest.model_dump(mode="json")
    if not row["description"] and manifest.description:
        row["description"] = manifest.description
    return row


def _plugin_folder(pm: PluginManager, plugin: str) -> Path | None:
    """Folder of the registering plugin's (already imported) hook module, for relative paths."""
    info = pm.infos.get(plugin)
    module_name = (info.module or "").partition(":")[0] if info else ""
    module = sys.modules.get(module_name)
    file = getattr(module, "__file__", None)
    return Path(file).parent if file else None


def envs_document(pm: PluginManager) -> dict[str, Any]:
    """The ``--json`` document (see the module docstring for the schema)."""
    from openenv.registry import NameConflictError

    conflicts = [{"name": name, "plugins": [e.plugin for e in conflict.entries], "error": str(conflict)}
                 for name, holders in pm.catalog.envs.conflicts().items()
                 for conflict in [NameConflictError("env", name, holders)]]
    return {"schema": SCHEMA, "envs": [env_row(e, pm) for e in pm.catalog.envs],
            "conflicts": conflicts}


@app.command("list")
def list_envs(
    as_json: Annotated[bool, typer.Option("--json", help=f"Print JSON ({SCHEMA}).")] = False,
) -> None:
    """List registered environments (name, plugin, reference, manifest) without importing them."""
    from openenv.plugins import get_plugin_manager

    doc = envs_document(get_plugin_manager())
    if as_json:
        print_json(doc)
        return
    out = console()
    for conflict in doc["conflicts"]:
        out.print(f"[yellow]{_escape(conflict['error'])}[/yellow]")
    if not doc["envs"]:
        out.print("No environments registered. Install an env package, e.g. "
                  "`pip install openenvkit-env-echo`.")
        return
    t = table("Env", "Plugin", "Reference", "Description", "Manifest")
    for row in doc["envs"]:
        t.add_row(*(_escape(v) for v in (row["name"], row["plugin"], row["ref"],
                                         row["description"] or "-")), _manifest_cell(row))
    out.print(t)


def _manifest_cell(row: dict[str, Any]) -> str:
    if row["manifest_error"]:
        return f"[red]{_escape(row['manifest_error'])}[/red]"
    manifest = row["manifest"]
    if manifest is None:
        return "-"
    parts = [f"{manifest['type']}/{manifest['runtime']}", f"port {manifest['port']}"]
    if manifest.get("version"):
        parts.insert(0, f"v{manifest['version']}")
    if manifest.get("tags"):
        parts.append("tags: " + ", ".join(manifest["tags"]))
    return _escape(" · ".join(parts))


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def register(root: typer.Typer) -> None:
    """Mount ``openenv envs`` on the root app."""
    root.add_typer(app, name="envs")
