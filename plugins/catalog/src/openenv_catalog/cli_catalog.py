"""``openenv catalog build|inspect`` and ``openenv discover`` (docs/catalog.md).

``discover`` ranks entries by a documented score: for each query word, 5 when it is an entry's name
(2 when it is part of it), 3 when it is one of its tags (or a dash-separated part of one), 2 when it
appears in an example query, 1 when it appears in the description or names a tool. Entries that score
nothing are dropped; ties go by name.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from openenv.cli.output import EXIT_USAGE, console, fail, print_json, table

__all__ = ["app", "discover", "rank", "score"]

app = typer.Typer(help="Build and inspect versioned, metadata-only catalogs of environments.",
                  no_args_is_help=True)


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


@app.command("build")
def build(
    output: Annotated[Path, typer.Option("--output", "-o", help="Catalog file to write (JSON).")],
    rev: Annotated[str | None, typer.Option(
        "--rev", "--revision", help="Git revision to read (commit, branch, tag). Default HEAD, refused while manifests "
                      "under --root have uncommitted changes.")] = None,
    repo: Annotated[Path, typer.Option("--repo", "--repository", help="The git checkout to read.")] = Path("."),
    root: Annotated[str, typer.Option("--root", help="Folder (in the repository) holding the env packages.")]
    = "envs",
    repo_url: Annotated[str | None, typer.Option(
        "--repo-url", "--repository-uri",
        help="Repository URL for install hints (default: the `origin` remote).")] = None,
) -> None:
    """Build a catalog from the committed manifests (openenv.yaml) of a git revision; no env code is read."""
    from openenv_catalog.catalog import CatalogError, build_catalog, write_catalog

    try:
        doc = build_catalog(repo, rev=rev, root=root, repo_url=repo_url)
        write_catalog(doc, output)
    except CatalogError as exc:
        fail(str(exc), EXIT_USAGE)
    typer.echo(f"wrote {output}: {len(doc['entries'])} envs from {doc['source']['revision'][:12]} "
               f"({doc['source']['ref']})", err=True)


def _find(entries: list[dict[str, Any]], name: str, source: str) -> dict[str, Any]:
    found = [entry for entry in entries if entry["name"] == name]
    if found:
        return found[0]
    close = difflib.get_close_matches(name, [e["name"] for e in entries], n=1)
    hint = f"did you mean {close[0]!r}? " if close else ""
    fail(f"no env {name!r} in {source}: {hint}`openenv catalog inspect {source}` lists them all.", EXIT_USAGE)
    raise AssertionError("fail() exits")  # for the type checker, which cannot see fail's NoReturn


@app.command("inspect")
def inspect(
    source: Annotated[str | None, typer.Argument(help="Catalog file or http(s) URL.")] = None,
    name: Annotated[str | None, typer.Argument(help="One env to show in full.")] = None,
    catalog: Annotated[str | None, typer.Option(
        "--catalog", help="The catalog, upstream's way (`inspect NAME --catalog FILE`).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (the catalog, or the one entry).")] = False,
) -> None:
    """List a catalog's envs, or show one entry in full."""
    from openenv_catalog.catalog import CatalogError, load_catalog

    if catalog is not None:
        if name is not None:
            fail(f"give the catalog once: `openenv catalog inspect {catalog} {name}`.", EXIT_USAGE)
        source, name = catalog, source
    if source is None:
        fail("give a catalog: `openenv catalog inspect FILE|URL [ENV]`.", EXIT_USAGE)
        raise AssertionError("fail() exits")

    try:
        doc = load_catalog(source)
    except CatalogError as exc:
        fail(str(exc), EXIT_USAGE)
    if name is not None:
        entry = _find(doc["entries"], name, source)
        if as_json:
            print_json(entry)
        else:
            _print_entry(entry)
        return
    if as_json:
        print_json(doc)
        return
    src = doc["source"]
    t = table("Env", "Version", "Description", "Tags", "Install", identifiers=("Env",), optional=("Install",),
              title=f"{src['repository']} @ {src['revision'][:12]} ({len(doc['entries'])} envs)")
    for entry in doc["entries"]:
        t.add_row(*(_escape(v) for v in (entry["name"], entry["version"] or "-", entry["description"] or "-",
                                         ", ".join(entry["tags"]) or "-", entry["install"]["command"] or "-")))
    console().print(t)


def _print_entry(entry: dict[str, Any]) -> None:
    def schema(value: dict[str, str] | None) -> str:
        return ", ".join(f"{k}: {v}" for k, v in value.items()) if value else "not declared in the manifest"

    tasks = entry["tasks"]
    if tasks is None:
        task_text = "none declared"
    else:
        splits = ", ".join(f"{s['name']} ({s['type']}" + (f", {s['count']}" if s["count"] is not None else "") + ")"
                           for s in tasks["splits"]) or "no splits declared"
        task_text = f"{tasks['source']}" + (f" {tasks['file']}" if tasks["source"] == "file" else "") + f": {splits}"
    rows = [
        ("name", entry["name"]), ("version", entry["version"] or "-"), ("description", entry["description"] or "-"),
        ("tags", ", ".join(entry["tags"]) or "-"), ("examples", "; ".join(entry["examples"]) or "-"),
        ("tools", ", ".join(entry["tools"]) or "-"),
        ("reward range", str(entry["reward_range"]) if entry["reward_range"] else "-"),
        ("action", schema(entry["schemas"]["action"])), ("observation", schema(entry["schemas"]["observation"])),
        ("tasks", task_text), ("manifest", entry["source"]["manifest"]), ("revision", entry["source"]["revision"]),
        ("install", entry["install"]["command"] or "-"),
    ]
    width = max(len(k) for k, _ in rows)
    for key, value in rows:
        typer.echo(f"{key:<{width}}  {value}")


# -- discover -------------------------------------------------------------------------------------


def score(entry: dict[str, Any], words: list[str]) -> float:
    """The documented score of one entry for the query ``words`` (module docstring)."""
    name = entry["name"].lower()
    tags = [t.lower() for t in entry.get("tags") or []]
    examples = " ".join(entry.get("examples") or []).lower()
    text = (entry.get("description") or "").lower()
    tools = [t.lower() for t in entry.get("tools") or []]
    total = 0.0
    for word in words:
        if word == name:
            total += 5
        elif word in name:
            total += 2
        if any(word == t or word in t.split("-") for t in tags):
            total += 3
        if word in examples:
            total += 2
        if word in text or any(word in t for t in tools):
            total += 1
    return total


def _installed() -> list[dict[str, Any]]:
    """Installed envs as catalog-shaped entries (their manifests read, nothing imported)."""
    from openenv.cli.envs_cmd import envs_document
    from openenv.plugins import get_plugin_manager

    entries = []
    for row in envs_document(get_plugin_manager())["envs"]:
        manifest = row["manifest"] or {}
        entries.append({"name": row["name"], "version": manifest.get("version") or row["extra"].get("version"),
                        "description": row["description"] or manifest.get("description") or "",
                        "tags": manifest.get("tags") or [], "examples": manifest.get("examples") or [],
                        "tools": manifest.get("tools") or [], "installed": True, "catalog": None,
                        "install": {"command": None}})
    return entries


def rank(query: str, catalogs: list[tuple[str, dict[str, Any]]], installed: list[dict[str, Any]],
         filters: dict[str, str] | None = None) -> list[tuple[float, dict[str, Any]]]:
    """Score the catalogs' entries and the installed envs; one row per env name (an installed env
    keeps its own description and gains the tags, examples and tools of a catalog entry of its name).
    An empty query keeps every row (score 0, by name); ``filters`` (``FILTERS``) keep exact matches."""
    words = [w for w in query.lower().replace(",", " ").split() if w]
    rows: dict[str, dict[str, Any]] = {e["name"]: dict(e) for e in installed}
    for source, doc in catalogs:
        for entry in doc["entries"]:
            row = rows.get(entry["name"])
            if row is not None:
                # Installed and catalogued: the catalog's words make the installed env findable too.
                for key in ("tags", "examples", "tools"):
                    row[key] = list(dict.fromkeys([*(row.get(key) or []), *entry[key]]))
                row["description"] = row["description"] or entry["description"]
                row["catalog"] = row["catalog"] or source
                continue
            rows[entry["name"]] = {**entry, "installed": False, "catalog": source}
    kept = [row for row in rows.values() if all(FILTERS[key](row, value) for key, value in (filters or {}).items())]
    ranked = [(score(row, words), row) for row in kept]
    ranked = [(s, row) for s, row in ranked if s > 0 or not words]
    ranked.sort(key=lambda item: (-item[0], item[1]["name"]))
    return ranked


def _did_you_mean(query: str, rows: list[dict[str, Any]]) -> str:
    vocabulary = sorted({r["name"] for r in rows} | {t for r in rows for t in r.get("tags") or []})
    close = [m for w in query.lower().split() for m in difflib.get_close_matches(w, vocabulary, n=2, cutoff=0.6)]
    return f"did you mean {', '.join(repr(c) for c in dict.fromkeys(close))}? " if close else ""


#: ``--filter KEY=VALUE``: exact matches, as upstream's ``discover --filter`` (the keys ours have).
FILTERS: dict[str, Callable[[dict[str, Any], str], bool]] = {
    "name": lambda row, value: row["name"] == value,
    "tags": lambda row, value: value in (row.get("tags") or []),
    "installed": lambda row, value: row["installed"] == (value.lower() in {"yes", "true", "1"}),
}


def _filters(values: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not value:
            fail(f"--filter {item!r}: write KEY=VALUE, e.g. --filter tags=game.", EXIT_USAGE)
        if key not in FILTERS:
            close = difflib.get_close_matches(key, FILTERS, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            fail(f"--filter {item!r}: unknown key {key!r}: {hint}the keys are {', '.join(FILTERS)}.", EXIT_USAGE)
        if key in found:
            fail(f"--filter {key}= is given twice: keep one.", EXIT_USAGE)
        found[key] = value
    return found


def discover(
    query: Annotated[str, typer.Argument(
        help="Words to look for (name, tags, description, tools); empty: every env.")] = "",
    catalog: Annotated[list[str] | None, typer.Option(
        "--catalog", "-c", help="Catalog file or http(s) URL to search (repeatable); installed envs are "
                                "always searched.")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="Show at most this many.")] = 20,
    filter_: Annotated[list[str] | None, typer.Option(
        "--filter", help=f"Exact KEY=VALUE (repeatable; keys: {', '.join(FILTERS)}).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Find environments in catalogs and among installed envs; say which are installed and how to get the rest."""
    from openenv_catalog.catalog import CatalogError, load_catalog

    filters = _filters(filter_ or [])
    catalogs: list[tuple[str, dict[str, Any]]] = []
    for source in catalog or []:
        try:
            catalogs.append((source, load_catalog(source)))
        except CatalogError as exc:
            fail(str(exc), EXIT_USAGE)
    installed = _installed()
    ranked = rank(query, catalogs, installed, filters)[:limit]
    if as_json:
        print_json({"schema": "openenv.discover/1", "query": query,
                    "results": [{"score": s, "name": r["name"], "installed": r["installed"], "catalog": r["catalog"],
                                 "description": r["description"], "tags": r.get("tags") or [],
                                 "install": r["install"]["command"]} for s, r in ranked]})
        return
    if not ranked:
        everything = installed + [e for _, doc in catalogs for e in doc["entries"]]
        where = f"{len(catalogs)} catalog(s) and the installed envs" if catalogs else "the installed envs"
        more = "" if catalogs else " (add --catalog FILE|URL to search a catalog too)"
        if filters:
            shown = " ".join(f"--filter {k}={v}" for k, v in filters.items())
            fail(f"nothing in {where} matches {query!r} with {shown}: drop a filter or try other words{more}.", 1)
        fail(f"nothing in {where} matches {query!r}: {_did_you_mean(query, everything)}"
             f"try other words{more}.", 1)
    t = table("Score", "Env", "Installed", "Description", "Get it", identifiers=("Score", "Env"),
              optional=("Get it",), title=f"envs matching '{_escape(query)}'" if query else "envs")
    for value, row in ranked:
        get = "-" if row["installed"] else (row["install"]["command"] or f"see {row['catalog']}")
        t.add_row(f"{value:g}", _escape(row["name"]), "yes" if row["installed"] else "no",
                  _escape(row["description"] or "-"), _escape(get))
    console().print(t)
