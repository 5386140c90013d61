"""``openenv envs list|search|show``: the registered environments, with their ``openenv.yaml`` data.

``search QUERY`` ranks installed envs by their name, manifest tags, example queries and
descriptions (reading manifests only); ``show NAME`` loads one env to print its schemas and tools
next to its manifest and provider hints.

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

__all__ = ["SCHEMA", "env_row", "envs_document", "register", "search_rows", "show_document"]

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
    t = table("Env", "Plugin", "Reference", "Description", "Manifest", identifiers=("Env", "Plugin", "Reference"),
              optional=("Reference", "Plugin"))
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


def search_rows(rows: list[dict[str, Any]], query: str) -> list[tuple[float, dict[str, Any]]]:
    """Rank env rows for ``query``: each query word scores by where it appears (name 5, tag 3,
    example query 2, description 1, a partial name match 2); rows that match nothing are dropped."""
    words = [w for w in query.lower().replace(",", " ").split() if w]
    ranked: list[tuple[float, dict[str, Any]]] = []
    for row in rows:
        manifest = row["manifest"] or {}
        name = row["name"].lower()
        tags = [t.lower() for t in manifest.get("tags") or []]
        examples = " ".join(manifest.get("examples") or []).lower()
        text = " ".join(filter(None, [row["description"], manifest.get("description")])).lower()
        score = 0.0
        for word in words:
            if word == name:
                score += 5
            elif word in name:
                score += 2
            if any(word == t or word in t.split("-") for t in tags):
                score += 3
            if word in examples:
                score += 2
            if word in text:
                score += 1
        if score > 0:
            ranked.append((score, row))
    ranked.sort(key=lambda item: (-item[0], item[1]["name"]))
    return ranked


@app.command("search")
def search(
    query: Annotated[str, typer.Argument(help="Words to look for (name, tags, description, example queries).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Find installed environments by name, tag, description or example query (ranked)."""
    from openenv.plugins import get_plugin_manager

    ranked = search_rows(envs_document(get_plugin_manager())["envs"], query)
    if as_json:
        print_json({"schema": "openenv.envs-search/1", "query": query,
                    "results": [{"score": score, **row} for score, row in ranked]})
        return
    out = console()
    if not ranked:
        out.print(f"No installed env matches '{_escape(query)}'. `openenv envs list` shows them all.")
        raise typer.Exit(1)
    t = table("Score", "Env", "Description", "Tags", identifiers=("Score", "Env"),
              title=f"envs matching '{_escape(query)}'")
    for score, row in ranked:
        tags = ", ".join((row["manifest"] or {}).get("tags") or [])
        t.add_row(f"{score:g}", _escape(row["name"]), _escape(row["description"] or "-"), _escape(tags or "-"))
    out.print(t)


def show_document(name: str) -> dict[str, Any]:
    """``openenv envs show NAME --json``: the registration, manifest, schemas, tools and provider hints."""
    from openenv.cli._output import EXIT_USAGE, fail
    from openenv.env import env_class_of, env_traits
    from openenv.errors import UnknownNameError
    from openenv.plugins import get_plugin_manager

    pm = get_plugin_manager()
    try:
        entry = pm.catalog.envs.get(name)
    except UnknownNameError as exc:
        fail(str(exc), EXIT_USAGE)
    doc: dict[str, Any] = {"schema": "openenv.env-show/1", **env_row(entry, pm), "load_error": None,
                           "action_schema": None, "observation_schema": None, "traits": None, "tools": None}
    try:
        obj = entry.load()
        found = env_class_of(obj)
        if found is None:
            raise TypeError(f"{entry.ref_text} does not name an env class")
        cls: Any = found
        doc["traits"] = env_traits(obj)
        doc["action_schema"] = cls.action_type.model_json_schema()
        doc["observation_schema"] = cls.observation_type.model_json_schema()
        from openenv.tools import ToolEnvironment

        if issubclass(cls, ToolEnvironment):
            instance = obj()
            try:
                doc["tools"] = [{"name": s.name, "description": getattr(s, "description", "")}
                                for s in instance.list_tools()]
            finally:
                instance.close()
    except Exception as exc:
        doc["load_error"] = f"{type(exc).__name__}: {exc}"
    manifest = doc["manifest"] or {}
    traits = doc["traits"] or {}
    doc["provider_hints"] = {
        "max_sessions": "many (SUPPORTS_CONCURRENT_SESSIONS)" if traits.get("SUPPORTS_CONCURRENT_SESSIONS") else 1,
        "port": manifest.get("port", 8000),
        "docker_image": f"openenv-{name}:{manifest.get('version') or 'latest'}",
        **(manifest.get("provider") or {}),
        **{k: v for k, v in manifest.items() if k in ("resources",)},
    }
    return doc


@app.command("show")
def show(
    name: Annotated[str, typer.Argument(help="Registered env name.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (openenv.env-show/1).")] = False,
) -> None:
    """Show one environment: manifest, action/observation schema, tools and provider hints."""
    import json

    doc = show_document(name)
    if as_json:
        print_json(doc)
        return
    out = console()
    out.print(f"[bold]{_escape(doc['name'])}[/bold]  ({_escape(doc['ref'])}, plugin {_escape(doc['plugin'])})")
    out.print(_escape(doc["description"] or "-"))
    if doc["manifest_error"]:
        out.print(f"[red]manifest: {_escape(doc['manifest_error'])}[/red]")
    if doc["load_error"]:
        out.print(f"[red]could not load the env: {_escape(doc['load_error'])}[/red]")
    for title, key in (("manifest", "manifest"), ("action schema", "action_schema"),
                       ("observation schema", "observation_schema"), ("tools", "tools"),
                       ("provider hints", "provider_hints")):
        if doc.get(key) is not None:
            out.print(f"\n[bold]{title}[/bold]")
            out.print(_escape(json.dumps(doc[key], indent=2)), highlight=False)


def register(root: typer.Typer) -> None:
    """Mount ``openenv envs`` on the root app."""
    root.add_typer(app, name="envs")
