"""Pinned PyPI sdists with their own test suites: downloaded once into a cache, never vendored."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DEFAULT_PROJECTS", "CACHE_ENV", "Project", "SweGenError", "default_cache", "fetch", "parse_project"]

CACHE_ENV = "OPENENV_SWEGEN_CACHE"
PYPI = os.environ.get("OPENENV_SWEGEN_INDEX", "https://pypi.org/simple").rstrip("/")


class SweGenError(Exception):
    """Bad input or an unusable project: the message names what went wrong and the fix."""


@dataclass(frozen=True)
class Project:
    """A pinned project: where its package and tests sit in the sdist, and its split."""

    name: str
    version: str
    tests: tuple[str, ...] = ()  # test files/folders relative to the sdist root; () = found
    split: str = ""  # "" = by the generator's --test-projects

    @property
    def spec(self) -> str:
        return f"{self.name}=={self.version}"


#: Pure-Python, no runtime dependencies, tests in the sdist passing with plain pytest (checked by hand;
#: wcwidth gave no candidates, tabulate's tests skip in the box, itsdangerous's need more than pytest).
#: Nine projects; the ``test`` split is two whole projects, so no test task shares code with training.
DEFAULT_PROJECTS: tuple[Project, ...] = (
    Project("cachetools", "5.5.0", ("tests",), "train"),
    Project("inflection", "0.5.1", ("test_inflection.py",), "train"),
    Project("isodate", "0.7.2", ("tests",), "train"),
    Project("semver", "3.0.2", ("tests",), "train"),
    Project("toolz", "1.0.0", ("toolz/tests",), "train"),
    Project("more-itertools", "10.5.0", ("tests",), "train"),
    Project("parse", "1.20.2", ("tests",), "train"),
    Project("idna", "3.10", ("tests",), "test"),
    Project("pathspec", "0.12.1", ("tests",), "test"),
)
_KNOWN = {p.name: p for p in DEFAULT_PROJECTS}
_SPEC = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([A-Za-z0-9][A-Za-z0-9.+!_-]*)$")


def parse_project(spec: str) -> Project:
    """``name==version`` (a built-in project's name alone takes its pinned version)."""
    spec = spec.strip()
    if spec in _KNOWN:
        return _KNOWN[spec]
    match = _SPEC.match(spec)
    if not match:
        raise SweGenError(f"project {spec!r}: give NAME==VERSION (a pinned version), e.g. inflection==0.5.1")
    name, version = match.groups()
    known = _KNOWN.get(name)
    return Project(name, version, known.tests if known else (), known.split if known else "")


def default_cache() -> Path:
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "openenv" / "swegen")


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _sdist_url(project: Project) -> tuple[str, str, str]:
    """The sdist's URL, file name and sha256 from the index's simple API (PEP 691 JSON)."""
    url = f"{PYPI}/{_norm(project.name)}/"
    request = urllib.request.Request(url, headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            info = json.load(response)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            raise SweGenError(f"project {project.spec}: not on the package index (check the name at "
                              "https://pypi.org)") from None
        raise SweGenError(f"project {project.spec}: the package index answered {exc.code} ({url})") from None
    except (urllib.error.URLError, TimeoutError) as exc:
        raise SweGenError(f"project {project.spec}: cannot reach the package index ({exc}); "
                          f"connect, or fill the cache ({CACHE_ENV}) on a connected machine") from None
    versions = set()
    for entry in info.get("files", []):
        filename = entry.get("filename", "")
        stem = filename.removesuffix(".tar.gz").removesuffix(".zip")
        if stem == filename or "-" not in stem:
            continue
        name, version = stem.rsplit("-", 1)
        versions.add(version)
        if _norm(name) == _norm(project.name) and version == project.version:
            return urllib.parse.urljoin(url, entry["url"]), filename, entry.get("hashes", {}).get("sha256", "")
    latest = sorted(versions)[-3:]
    raise SweGenError(f"project {project.spec}: no sdist of version {project.version} on the package index "
                      f"(some with one: {', '.join(latest) or 'none'})")


def _extract(archive: Path, dest: Path) -> None:
    if archive.name.endswith(".zip"):
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(dest)
    else:
        with tarfile.open(archive) as tar:
            tar.extractall(dest, filter="data")


def fetch(project: Project, cache: Path | None = None) -> Path:
    """The sdist's unpacked tree (downloaded and unpacked once into the cache)."""
    cache = cache or default_cache()
    tree = cache / "src" / f"{project.name}-{project.version}"
    if (tree / ".openenv-complete").is_file():
        return tree
    url, filename, sha256 = _sdist_url(project)
    (cache / "sdists").mkdir(parents=True, exist_ok=True)
    archive = cache / "sdists" / filename
    if not archive.is_file():
        with urllib.request.urlopen(url, timeout=60) as response:
            data = response.read(64 * 1024 * 1024 + 1)
        if len(data) > 64 * 1024 * 1024:
            raise SweGenError(f"project {project.spec}: sdist over 64 MiB (pick a smaller project)")
        if sha256 and hashlib.sha256(data).hexdigest() != sha256:
            raise SweGenError(f"project {project.spec}: {filename} does not match the index's sha256 (retry)")
        partial = archive.with_suffix(".part")
        partial.write_bytes(data)
        partial.replace(archive)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        _extract(archive, Path(tmp))
        tops = [p for p in Path(tmp).iterdir() if p.is_dir()]
        if len(tops) != 1:
            raise SweGenError(f"project {project.spec}: {filename} does not unpack to one folder")
        shutil.rmtree(tree, ignore_errors=True)
        tree.parent.mkdir(parents=True, exist_ok=True)
        tops[0].replace(tree)
    (tree / ".openenv-complete").write_text(project.spec + "\n")
    return tree
