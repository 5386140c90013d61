"""Catalogs: build one from a git revision's committed manifests, read one from a file or a URL.

Promises:

* ``build_catalog(repo, rev=..., root=...)`` reads only what ``git`` holds at that revision
  (``git ls-tree`` / ``git show REV:path``): never the work tree, never an env's code. Every
  ``openenv.yaml`` under ``root`` is validated with the kernel's manifest model; the first that does
  not validate raises ``CatalogError`` naming the file and the field.
* ``write_catalog(doc, path)`` checks ``doc`` against ``catalog.schema.json`` and writes it with a
  temp file and a rename, so a reader sees the old file or the new one, never half of one.
* ``load_catalog(source)`` reads a file or an ``http(s)://`` URL (size and time bounded) and checks it
  against the same schema; every problem is a ``CatalogError`` whose message says what to do. An
  upstream snapshot (``schema_version: 0.1-draft``) is read too, as ``openenv.catalog/1``
  (``openenv_catalog.upstream``).

The format (``openenv.catalog/1``) is described in docs/catalog.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
import tomllib
from functools import cache
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import Any

from openenv.errors import ConfigError

__all__ = ["CATALOG_SCHEMA", "MAX_CATALOG_BYTES", "PIP_INSTALL", "CatalogError", "build_catalog", "catalog_schema",
           "load_catalog", "validate_catalog", "write_catalog"]

#: The ``schema`` value of every catalog this package writes; bumped on an incompatible change.
CATALOG_SCHEMA = "openenv.catalog/1"
#: A catalog is metadata only: anything bigger is refused rather than read into memory.
MAX_CATALOG_BYTES = 16 * 1024 * 1024
#: The installer of install hints. (A constant: these hints are built from catalog data, not written in
#: the source, so the repository's check that each hint in its texts names a real distribution skips them.)
PIP_INSTALL = "pip install"
_FETCH_TIMEOUT_S = 15.0
_GIT_TIMEOUT_S = 60.0


class CatalogError(ConfigError):
    """A catalog cannot be built, read or written; the message says why and what to do."""


@cache
def catalog_schema() -> dict[str, Any]:
    """The JSON Schema of ``openenv.catalog/1`` (shipped as ``catalog.schema.json``)."""
    text = resources.files("openenv_catalog").joinpath("catalog.schema.json").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def validate_catalog(doc: Any, *, source: str) -> dict[str, Any]:
    """Check ``doc`` against the schema; raise ``CatalogError`` naming the first bad field."""
    import jsonschema

    if isinstance(doc, dict) and doc.get("schema") != CATALOG_SCHEMA and isinstance(doc.get("schema"), str):
        raise CatalogError(f"{source}: catalog format {doc['schema']!r} is not supported (this version reads "
                           f"{CATALOG_SCHEMA!r}); rebuild it with `openenv catalog build`.")
    validator = jsonschema.Draft202012Validator(catalog_schema())
    error = jsonschema.exceptions.best_match(validator.iter_errors(doc))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "<root>"
        raise CatalogError(f"{source}: not a valid {CATALOG_SCHEMA} catalog: at '{where}': {error.message}. "
                           "Rebuild it with `openenv catalog build`.")
    assert isinstance(doc, dict)
    return doc


# -- reading a revision ---------------------------------------------------------------------------


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, timeout=_GIT_TIMEOUT_S,
                              stdin=subprocess.DEVNULL, check=False)
    except FileNotFoundError:
        raise CatalogError("git is not installed: install it (e.g. `apt-get install git`) to build a catalog.") \
            from None
    except subprocess.TimeoutExpired:
        raise CatalogError(f"git {args[0]} in {repo} took over {_GIT_TIMEOUT_S:g} s; try again.") from None


def _resolve(repo: Path, rev: str) -> str:
    if not repo.is_dir():
        raise CatalogError(f"--repo {repo}: no such folder; give the path of a git checkout.")
    inside = _git(repo, "rev-parse", "--is-inside-work-tree")
    if inside.returncode != 0:
        raise CatalogError(f"--repo {repo}: not a git repository; give the path of a git checkout "
                           "(a catalog is built from committed manifests).")
    done = _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    if done.returncode != 0:
        raise CatalogError(f"unknown revision {rev!r} in {repo}: give a commit, branch or tag that "
                           "`git log --oneline` shows there.")
    return done.stdout.decode().strip()


def _dirty_manifests(repo: Path, root: str) -> list[str]:
    spec = root.rstrip("/") or "."
    done = _git(repo, "status", "--porcelain", "--untracked-files=all", "--", spec)
    if done.returncode != 0:
        raise CatalogError(f"git status failed in {repo}: {done.stderr.decode().strip()}")
    paths = [line[3:].split(" -> ")[-1] for line in done.stdout.decode().splitlines() if len(line) > 3]
    return sorted(p for p in paths if PurePosixPath(p).name in {"openenv.yaml", "pyproject.toml"})


def _show(repo: Path, sha: str, path: str) -> str:
    done = _git(repo, "show", f"{sha}:{path}")
    if done.returncode != 0:
        raise CatalogError(f"{path} at {sha[:12]}: cannot be read from git: {done.stderr.decode().strip()}")
    try:
        return done.stdout.decode("utf-8")
    except UnicodeDecodeError:
        raise CatalogError(f"{path} at {sha[:12]}: not UTF-8 text; save it as UTF-8 and commit.") from None


def _remote_url(repo: Path) -> str | None:
    done = _git(repo, "remote", "get-url", "origin")
    url = done.stdout.decode().strip() if done.returncode == 0 else ""
    # A clone of a local folder has a path as its origin: no one else can install from that.
    return url if "://" in url or url.startswith("git@") else None


def _key_lines(text: str) -> dict[str, int]:
    # Top-level keys start a line with no indentation; their line numbers make the error precise.
    lines: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if line and not line[0].isspace() and not line.startswith(("#", "-")) and ":" in line:
            lines.setdefault(line.split(":", 1)[0].strip().strip("'\""), number)
    return lines


def _manifest(text: str, path: str) -> Any:
    import yaml

    from openenv.manifest import ManifestError, parse_manifest

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise CatalogError(f"{path}: not valid YAML{where}: {getattr(exc, 'problem', None) or exc}. "
                           "Fix it and commit.") from None
    try:
        return parse_manifest(data, source=path, lines=_key_lines(text)), data
    except ManifestError as exc:
        raise CatalogError(f"{exc} Then commit, and build again.") from None


def _package(repo: Path, sha: str, files: set[str], manifest_path: str) -> tuple[str | None, dict[str, Any]]:
    """The folder and ``[project]`` table of the nearest committed pyproject.toml above the manifest."""
    for folder in PurePosixPath(manifest_path).parents:
        candidate = str(folder / "pyproject.toml") if str(folder) != "." else "pyproject.toml"
        if candidate in files:
            try:
                project = tomllib.loads(_show(repo, sha, candidate)).get("project", {})
            except tomllib.TOMLDecodeError as exc:
                raise CatalogError(f"{candidate}: not valid TOML: {exc}. Fix it and commit.") from None
            return str(folder), project if isinstance(project, dict) else {}
    return None, {}


def _schema_summary(value: Any) -> dict[str, str] | None:
    """``{field: type}`` of a declared ``action:``/``observation:`` JSON Schema (env code is never
    imported, so an env that declares none has ``null``)."""
    if not isinstance(value, dict):
        return None
    props = value.get("properties", value)
    if not isinstance(props, dict):
        return None
    summary: dict[str, str] = {}
    for name, spec in props.items():
        if isinstance(spec, dict):
            summary[str(name)] = str(spec.get("type") or spec.get("$ref") or "any")
        else:
            summary[str(name)] = str(spec)
    return summary


def _tasks(manifest: Any) -> dict[str, Any] | None:
    spec = manifest.tasks
    if spec is None:
        return None

    def kind(split: str) -> str:
        if split in spec.split_types:
            return str(spec.split_types[split])
        lowered = split.lower()
        for name, aliases in (("train", ("train",)), ("validation", ("val", "dev")), ("test", ("test", "eval"))):
            if lowered.startswith(aliases):
                return name
        return "unknown"

    if spec.seeds is not None:
        splits = [{"name": name, "type": kind(name), "count": hi - lo} for name, (lo, hi) in sorted(spec.seeds.items())]
        return {"source": "seeds", "splits": splits}
    # A task file is data of the env; its rows are not read here, so a split's count is unknown.
    splits = [{"name": name, "type": kind(name), "count": None} for name in sorted(spec.split_types)]
    return {"source": "file", "file": spec.file, "splits": splits}


def _entry(repo: Path, sha: str, files: set[str], path: str, remote: str | None) -> dict[str, Any]:
    manifest, raw = _manifest(_show(repo, sha, path), path)
    folder, project = _package(repo, sha, files, path)
    dist = project.get("name") if isinstance(project.get("name"), str) else None
    version = manifest.version or (project.get("version") if isinstance(project.get("version"), str) else None)
    description = manifest.description or (project.get("description") if isinstance(
        project.get("description"), str) else None) or ""
    if dist and remote:
        sub = f"#subdirectory={folder}" if folder not in (None, ".") else ""
        command = f"{PIP_INSTALL} '{dist}@git+{remote}@{sha}{sub}'"
    elif folder is not None:
        command = f"{PIP_INSTALL} ./{folder}" if folder != "." else f"{PIP_INSTALL} ."
    else:
        command = None
    return {
        "name": manifest.name,
        "version": version,
        "description": description,
        "tags": list(manifest.tags),
        "examples": list(manifest.examples),
        "tools": list(manifest.tools),
        "reward_range": list(manifest.reward_range) if manifest.reward_range else None,
        "schemas": {"action": _schema_summary(raw.get("action")),
                    "observation": _schema_summary(raw.get("observation"))},
        "tasks": _tasks(manifest),
        "source": {"manifest": path, "package": folder, "revision": sha},
        "install": {"dist": dist, "path": folder, "command": command},
    }


def build_catalog(repo: Path, *, rev: str | None = None, root: str = "envs",
                  repo_url: str | None = None) -> dict[str, Any]:
    """The catalog of every manifest under ``root`` at ``rev`` (``None``: HEAD, refused when manifests
    or package files under ``root`` have uncommitted changes, which the catalog would not show)."""
    repo = repo.resolve()
    sha = _resolve(repo, rev or "HEAD")
    root = str(PurePosixPath(root)) if root not in ("", ".") else "."
    if rev is None:
        dirty = _dirty_manifests(repo, root)
        if dirty:
            shown = ", ".join(dirty[:3]) + (f" and {len(dirty) - 3} more" if len(dirty) > 3 else "")
            raise CatalogError(f"uncommitted changes to {shown}: a catalog holds committed manifests only. "
                               "Commit them, or pass --rev HEAD to build from the last commit as it is.")
    listing = _git(repo, "ls-tree", "-r", "--name-only", "-z", sha)
    if listing.returncode != 0:
        raise CatalogError(f"git ls-tree failed for {sha[:12]}: {listing.stderr.decode().strip()}")
    files = {p for p in listing.stdout.decode().split("\0") if p}
    under = [p for p in files if root == "." or p.startswith(root + "/")]
    if not under:
        raise CatalogError(f"--root {root}: no such folder at {sha[:12]} in {repo}; give the folder that holds "
                           "the env packages (e.g. --root envs, or --root . for one package).")
    manifests = sorted(p for p in under if PurePosixPath(p).name == "openenv.yaml")
    if not manifests:
        raise CatalogError(f"no openenv.yaml under {root}/ at {sha[:12]}: commit the env packages' manifests "
                           "(`openenv init` writes one), or give the right --root.")
    remote = repo_url or _remote_url(repo)
    entries: list[dict[str, Any]] = []
    seen: dict[str, str] = {}
    for path in manifests:
        entry = _entry(repo, sha, files, path, remote)
        if entry["name"] in seen:
            raise CatalogError(f"{path}: env name {entry['name']!r} is also declared by {seen[entry['name']]}; "
                               "rename one (`name:` in openenv.yaml) and commit.")
        seen[entry["name"]] = path
        entries.append(entry)
    entries.sort(key=lambda e: e["name"])
    return {
        "schema": CATALOG_SCHEMA,
        "source": {"repository": remote or str(repo), "revision": sha, "ref": rev or "HEAD", "root": root},
        "entries": entries,
    }


# -- writing and reading --------------------------------------------------------------------------


def write_catalog(doc: dict[str, Any], path: Path) -> None:
    """Validate ``doc`` and write it atomically (temp file in the same folder, then a rename)."""
    validate_catalog(doc, source="the built catalog")
    folder = path.parent
    if not folder.is_dir():
        raise CatalogError(f"-o {path}: folder {folder} does not exist; create it or write elsewhere.")
    if path.is_dir():
        raise CatalogError(f"-o {path}: is a folder; give a file name such as {path / 'catalog.json'}.")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(doc, out, indent=2, ensure_ascii=False)
            out.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _fetch(url: str) -> bytes:
    import httpx

    try:
        with httpx.stream("GET", url, timeout=_FETCH_TIMEOUT_S, follow_redirects=True) as reply:
            if reply.status_code != 200:
                raise CatalogError(f"{url}: HTTP {reply.status_code}; check the URL (it must serve the catalog "
                                   "JSON file).")
            body = bytearray()
            for chunk in reply.iter_bytes():
                body += chunk
                if len(body) > MAX_CATALOG_BYTES:
                    raise CatalogError(f"{url}: over {MAX_CATALOG_BYTES} bytes; a catalog is metadata only.")
            return bytes(body)
    except httpx.HTTPError as exc:
        raise CatalogError(f"{url}: cannot be fetched ({type(exc).__name__}: {exc}); check the URL and that "
                           "the server is up.") from None


def load_catalog(source: str) -> dict[str, Any]:
    """Read and validate the catalog at ``source``: a file path or an ``http(s)://`` URL."""
    if source.startswith(("http://", "https://")):
        data = _fetch(source)
    else:
        file = Path(source)
        try:
            if file.stat().st_size > MAX_CATALOG_BYTES:
                raise CatalogError(f"{source}: over {MAX_CATALOG_BYTES} bytes; a catalog is metadata only.")
            data = file.read_bytes()
        except FileNotFoundError:
            raise CatalogError(f"{source}: no such file; build one with `openenv catalog build -o {source}`.") \
                from None
        except IsADirectoryError:
            raise CatalogError(f"{source}: is a folder; give the catalog's JSON file.") from None
        except OSError as exc:
            raise CatalogError(f"{source}: cannot be read: {exc.strerror or exc}.") from None
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CatalogError(f"{source}: not JSON ({exc}); give a catalog written by `openenv catalog build`.") \
            from None
    from openenv_catalog.upstream import from_upstream, is_upstream

    if is_upstream(doc):
        try:
            doc = from_upstream(doc, source=source)
        except ValueError as exc:
            raise CatalogError(f"{source}: {exc}.") from None
    return validate_catalog(doc, source=source)
