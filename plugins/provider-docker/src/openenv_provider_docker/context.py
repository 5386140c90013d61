"""The build context of an env image: wheels collected on the host, and a Dockerfile.

Why wheels on the host: the image build then needs no network (``pip install --no-index``), which
makes builds work where containers cannot download anything, and makes them reproducible (the
image gets exactly the wheels in the context).

Promises:

* ``read_env_package(path)`` reads the env package's ``pyproject.toml`` (it must register an
  ``openenv`` entry point) and, if present, its ``openenv.yaml``; errors say what to fix.
* Packages the image needs that cannot come from a package index (the kernel,
  ``openenvkit-transport-ws``, and any package the env depends on that is local) are built from
  their source folder: the env's uv workspace member, else the folder this interpreter installed
  them from (``pip install -e PATH`` / ``uv pip install PATH``, read from ``direct_url.json``), so
  an env package made anywhere (``openenv init my_game`` in any folder) builds as it does in this
  repository. Each such wheel is kept in the wheel cache (``$OPENENV_CACHE_DIR/wheels``, default
  ``~/.cache/openenv/wheels``) under its sources' hash and rebuilt only when they change; wheels put
  directly in that folder are used too (an OpenEnv release's wheels, for a host without a
  checkout). Everything else comes from the package index.
* ``collect_wheels`` builds the local wheels and lets pip resolve every dependency into the same
  folder, for the image's Python version.
* ``dockerfile`` is plain (no BuildKit features), so it builds on any Docker-API engine, Podman
  included. It is two-stage: the venv is built in the first stage and copied alone into the
  second, so the wheels never reach the final image.
* ``inputs_hash`` changes whenever a source file of a local package, the base image or the
  Dockerfile changes; ``openenv build`` skips a build whose hash the tagged image already has.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from glob import glob
from pathlib import Path
from urllib.parse import unquote, urlparse

from openenv.errors import ConfigError
from openenv_provider_docker.naming import (
    CONTAINER_PORT,
    LABEL_BUILD_HASH,
    LABEL_BUILD_STAGE,
    LABEL_ENV,
    LABEL_READ_ONLY,
    LABEL_SANDBOX_DROP,
    LABEL_SANDBOX_GVISOR,
    LABEL_SERVE,
    LABEL_VERSION,
)

__all__ = [
    "DEFAULT_BASE_IMAGE",
    "IMAGE_USER",
    "TRANSPORT_DIST",
    "EnvPackage",
    "cached_local_wheel",
    "collect_wheels",
    "dockerfile",
    "find_workspace",
    "image_requirements",
    "inputs_hash",
    "installed_source",
    "local_packages",
    "normalize",
    "read_env_package",
    "wheel_cache",
]

#: Default base image: a standard slim Python matching the host's minor version by default.
DEFAULT_BASE_IMAGE = "python:3.11-slim"
#: Numeric user the server runs as (numeric: works on bases without useradd or /etc/passwd entry).
IMAGE_USER = "10001:10001"
KERNEL_DIST = "openenvkit"
TRANSPORT_DIST = "openenvkit-transport-ws"
_SKIP_DIRS = {"__pycache__", ".venv", "venv", "dist", "build", "tests", ".git", ".nox", ".pytest_cache",
              ".mypy_cache", ".ruff_cache", "node_modules"}
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def normalize(name: str) -> str:
    """PEP 503 normalised distribution name."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass
class EnvPackage:
    """An env package folder, as ``openenv build`` sees it."""

    path: Path
    dist: str
    version: str
    env: str
    dependencies: list[str] = field(default_factory=list)
    read_only_root: bool = True
    description: str = ""
    #: The manifest's ``sandbox:`` (``drop_privileges``, ``gvisor``), or None when it declares none.
    sandbox: dict[str, object] | None = None


def _read_pyproject(path: Path) -> dict:
    file = path / "pyproject.toml"
    try:
        return tomllib.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path} has no pyproject.toml: `openenv build` needs the folder of an env "
                          "package (one whose pyproject.toml registers an `openenv` entry point).") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{file} is not valid TOML: {exc}.") from None


def read_env_package(path: str | Path, env: str | None = None) -> EnvPackage:
    """Read the env package at ``path``; ``env`` picks the env to serve when it registers several."""
    root = Path(path).resolve()
    project = _read_pyproject(root).get("project") or {}
    dist, version = project.get("name"), project.get("version")
    if not dist or not version:
        raise ConfigError(f"{root / 'pyproject.toml'}: [project] needs a `name` and a static `version`.")
    entry_points = (project.get("entry-points") or {}).get("openenv") or {}
    if not entry_points:
        raise ConfigError(
            f"{root / 'pyproject.toml'} registers no `openenv` entry point, so no env would be found "
            "in the image. Add:\n\n[project.entry-points.openenv]\nmy_env = \"my_env_package.plugin\"")
    manifest = _find_manifest(root)
    read_only_root = True
    manifest_name = None
    sandbox = None
    if manifest is not None:
        from openenv.manifest import load_manifest

        loaded = load_manifest(manifest)
        manifest_name = loaded.name
        sandbox = loaded.sandbox.model_dump() if loaded.sandbox is not None else None
        extra = loaded.model_extra or {}
        if "read_only_root" in extra:
            read_only_root = bool(extra["read_only_root"])
    name = env or manifest_name or next(iter(entry_points))
    return EnvPackage(path=root, dist=dist, version=str(version), env=name,
                      dependencies=list(project.get("dependencies") or []),
                      read_only_root=read_only_root, description=str(project.get("description") or ""),
                      sandbox=sandbox)


def _find_manifest(root: Path) -> Path | None:
    candidates = [root / "openenv.yaml", *sorted(root.glob("src/*/openenv.yaml")),
                  *sorted(root.glob("*/openenv.yaml"))]
    return next((c for c in candidates if c.is_file()), None)


# -- workspace ------------------------------------------------------------------------------------


def find_workspace(start: Path) -> dict[str, Path]:
    """Members of the uv workspace containing ``start`` (normalised dist name → folder), or ``{}``."""
    for folder in [start, *start.parents]:
        file = folder / "pyproject.toml"
        if not file.is_file():
            continue
        try:
            data = tomllib.loads(file.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError):
            continue
        members = ((data.get("tool") or {}).get("uv") or {}).get("workspace", {}).get("members")
        if members is None:
            continue
        found: dict[str, Path] = {}
        for pattern in members:
            for match in sorted(glob(str(folder / pattern))):
                member = Path(match)
                try:
                    name = (_read_pyproject(member).get("project") or {}).get("name")
                except ConfigError:
                    continue
                if name:
                    found[normalize(name)] = member
        return found
    return {}


def _dependency_names(folder: Path) -> list[str]:
    project = _read_pyproject(folder).get("project") or {}
    names = []
    for req in project.get("dependencies") or []:
        match = _NAME.match(req)
        if match:
            names.append(normalize(match.group(1)))
    return names


def installed_source(dist: str) -> Path | None:
    """The folder ``dist`` was installed from into this interpreter (an editable or a folder
    install: PEP 610's ``direct_url.json`` names a local directory), or ``None``."""
    try:
        text = importlib.metadata.distribution(dist).read_text("direct_url.json")
    except importlib.metadata.PackageNotFoundError:
        return None
    if not text:
        return None
    try:
        info = json.loads(text)
    except ValueError:
        return None
    url = urlparse(str(info.get("url", "")))
    if url.scheme != "file" or "dir_info" not in info:
        return None  # a wheel or an archive: no source folder to build from
    folder = Path(unquote(url.path))
    return folder if (folder / "pyproject.toml").is_file() else None


def local_packages(pkg: EnvPackage) -> list[Path]:
    """Folders to build wheels from: the env package and the local packages the image needs (the
    kernel, the ws transport and the env's local dependencies, transitively), each from the env's
    uv workspace or, outside one, from the folder this interpreter installed it from."""
    workspace = find_workspace(pkg.path)
    wanted = [normalize(pkg.dist), KERNEL_DIST, TRANSPORT_DIST]
    folders: dict[str, Path] = {normalize(pkg.dist): pkg.path}
    seen: set[str] = set()
    while wanted:
        name = wanted.pop()
        if name in seen:
            continue
        seen.add(name)
        folder = folders.get(name) or workspace.get(name) or installed_source(name)
        if folder is None:
            continue  # not local: pip takes it from the wheel cache or the index
        folders[name] = folder
        wanted.extend(_dependency_names(folder))
    return sorted(set(folders.values()))


def inputs_hash(folders: Iterable[Path], *extra: str) -> str:
    """Hash of the source files of ``folders`` plus ``extra`` strings (base image id, Dockerfile)."""
    digest = hashlib.sha256()
    for folder in sorted(folders):
        for file in sorted(_source_files(folder)):
            digest.update(str(file.relative_to(folder.parent)).encode())
            digest.update(b"\0")
            digest.update(file.read_bytes())
            digest.update(b"\0")
    for text in extra:
        digest.update(text.encode())
        digest.update(b"\0")
    return digest.hexdigest()[:32]


def _source_files(folder: Path) -> Iterable[Path]:
    for path in folder.iterdir():
        if path.is_dir():
            if path.name in _SKIP_DIRS or path.name.endswith(".egg-info"):
                continue
            yield from _source_files(path)
        elif path.is_file() and path.suffix not in (".pyc", ".pyo"):
            yield path


# -- wheels ---------------------------------------------------------------------------------------


def _pip() -> list[str]:
    """A pip for this interpreter: its own, or one uv provides in a throw-away environment."""
    if importlib.util.find_spec("pip") is not None:
        return [sys.executable, "-m", "pip"]
    uv = shutil.which("uv")
    if uv:
        return [uv, "run", "--no-project", "--quiet", "--python", sys.executable, "--with", "pip",
                "--", "python", "-m", "pip"]
    raise ConfigError("Collecting wheels needs pip: install it into this environment "
                      "(`uv pip install pip` or `python -m ensurepip`), or install uv.")


def _run(cmd: list[str], what: str) -> None:
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-25:])
        raise ConfigError(f"{what} failed (exit code {result.returncode}): {' '.join(cmd[:6])} …\n{tail}")


def wheel_cache() -> Path:
    """Where built wheels of local packages are kept, and where wheels put by hand are found."""
    base = os.environ.get("OPENENV_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "openenv")
    return Path(base) / "wheels"


def cached_local_wheel(folder: Path, out: Path) -> Path:
    """Copy the wheel of ``folder`` into ``out``: from the wheel cache when one was built from the
    same sources, else built now and kept there. Returns the cached wheel."""
    slot = wheel_cache() / "built" / inputs_hash([folder])
    found = sorted(slot.glob("*.whl")) if slot.is_dir() else []
    if not found:
        building = slot.with_name(slot.name + f".tmp{os.getpid()}")
        shutil.rmtree(building, ignore_errors=True)
        building.mkdir(parents=True)
        build_local_wheel(folder, building)
        try:
            building.rename(slot)
        except OSError:  # another build filled the slot first: use its wheel
            shutil.rmtree(building, ignore_errors=True)
        found = sorted(slot.glob("*.whl"))
    shutil.copy2(found[0], out / found[0].name)
    return found[0]


def build_local_wheel(folder: Path, out: Path) -> None:
    """Build one wheel of the package at ``folder`` into ``out`` (uv when present, else pip)."""
    uv = shutil.which("uv")
    if uv:
        cmd = [uv, "build", "--wheel", "--quiet", "--out-dir", str(out), str(folder)]
    else:
        cmd = [*_pip(), "wheel", "--quiet", "--no-deps", "--wheel-dir", str(out), str(folder)]
    _run(cmd, f"building the wheel of {folder.name}")


def image_requirements(pkg: EnvPackage) -> list[str]:
    """What the image installs: the env package and the ws transport (with their dependencies)."""
    return list(dict.fromkeys([normalize(pkg.dist), TRANSPORT_DIST]))


def collect_wheels(
    pkg: EnvPackage,
    out: Path,
    *,
    python_version: str,
    progress: Callable[[str], None] = lambda _: None,
) -> None:
    """Fill ``out`` with every wheel ``image_requirements(pkg)`` needs.

    Local packages are built first; pip then resolves the requirements and all their
    dependencies from those wheels and the index. When ``python_version`` differs from this
    interpreter's, only binary wheels for that version and this machine's Linux platform are used.
    """
    out.mkdir(parents=True, exist_ok=True)
    for folder in local_packages(pkg):
        progress(f"building wheel: {folder.name}")
        if folder == pkg.path:
            build_local_wheel(folder, out)  # the env itself changes between builds: not cached
        else:
            cached_local_wheel(folder, out)
    local_wheels = sorted(str(p) for p in out.glob("*.whl"))
    local_names = {normalize(Path(w).name.split("-")[0]) for w in local_wheels}
    extra = [r for r in image_requirements(pkg) if r not in local_names]
    progress(f"collecting dependency wheels for Python {python_version}")
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    links = ["--find-links", str(out)]
    if wheel_cache().is_dir():
        links += ["--find-links", str(wheel_cache())]
    if python_version == here:
        cmd = [*_pip(), "wheel", "--quiet", "--wheel-dir", str(out), *links, *local_wheels, *extra]
    else:
        cmd = [*_pip(), "download", "--quiet", "--dest", str(out), *links,
               "--only-binary=:all:", "--python-version", python_version, "--implementation", "cp",
               *_platform_args(), *local_wheels, *extra]
    try:
        _run(cmd, "collecting dependency wheels")
    except ConfigError as exc:
        missing = re.search(r"No matching distribution found for (openenvkit[\w.-]*)", str(exc))
        if missing is None:
            raise
        name = missing.group(1)
        raise ConfigError(
            f"{exc}\n{name} is not on the package index, and this build found no source of it: it is not "
            f"a member of the env's uv workspace, not installed from a folder into this Python "
            f"({sys.executable}), and no wheel of it is in {wheel_cache()}. Fix: install OpenEnv from "
            f"its checkout into this Python (`uv pip install -e PATH/TO/OpenEnv/kernel -e "
            f"PATH/TO/OpenEnv/plugins/transport-ws`), or put its wheel in {wheel_cache()}.") from None


def _platform_args() -> list[str]:
    import platform

    machine = platform.machine().lower().replace("arm64", "aarch64")
    tags = [f"manylinux_2_{minor}_{machine}" for minor in (17, 28, 31, 34)]
    tags += [f"manylinux2014_{machine}", f"linux_{machine}"]
    return [arg for tag in tags for arg in ("--platform", tag)]


# -- Dockerfile -----------------------------------------------------------------------------------


def dockerfile(pkg: EnvPackage, *, base_image: str, python: str, python_version: str,
               build_hash: str = "") -> str:
    """The Dockerfile of an env image (see the module docstring)."""
    reqs = " ".join(image_requirements(pkg))
    check = (f"import sys; v='%d.%d' % sys.version_info[:2]; sys.exit(0 if v == '{python_version}' "
             f"else 'the base image has Python ' + v + ' but the wheels were collected for "
             f"{python_version}: pass --python-version ' + v)")
    # Inside the container the server must listen on every interface of its own network namespace;
    # the engine publishes that port on the host's 127.0.0.1 only, so this is not an open server.
    cmd = ["/opt/venv/bin/python", "-m", "openenv", "serve", pkg.env, "--host", "0.0.0.0",
           "--port", str(CONTAINER_PORT), "--allow-open"]
    labels = {
        LABEL_ENV: pkg.env,
        LABEL_VERSION: pkg.version,
        LABEL_SERVE: "1",
        LABEL_READ_ONLY: "true" if pkg.read_only_root else "false",
        LABEL_BUILD_HASH: build_hash,
        "org.opencontainers.image.title": f"openenv-{pkg.env}",
        "org.opencontainers.image.version": pkg.version,
        "org.opencontainers.image.description": pkg.description,
    }
    if pkg.sandbox is not None:
        labels[LABEL_SANDBOX_DROP] = "true" if pkg.sandbox.get("drop_privileges") else "false"
        labels[LABEL_SANDBOX_GVISOR] = str(pkg.sandbox.get("gvisor") or "auto")
    label_lines = " \\\n      ".join(f"{k}={json.dumps(v)}" for k, v in labels.items())
    return f"""\
# Generated by `openenv build` for {pkg.dist} {pkg.version}. Plain Dockerfile (no BuildKit features).
FROM {base_image} AS build
# Lets `openenv build` delete this stage's superseded images (the classic builder keeps them).
LABEL {LABEL_BUILD_STAGE}={json.dumps(pkg.env)}
COPY wheels /wheels
# Offline install: every wheel was collected on the host, so this step needs no network.
RUN {python} -c {json.dumps(check)} \\
 && {python} -m venv /opt/venv \\
 && /opt/venv/bin/python -m pip install --no-index --find-links /wheels --no-cache-dir \\
        --disable-pip-version-check --no-warn-script-location {reqs} \\
 && /opt/venv/bin/python -m pip uninstall --yes --quiet pip \\
 && /opt/venv/bin/python -m compileall -q --invalidation-mode unchecked-hash /opt/venv/lib
# unchecked-hash .pyc files are never re-validated against sources: with a read-only root the
# interpreter could not rewrite them, and checking would only cost start-up time.

FROM {base_image}
LABEL {label_lines}
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 HOME=/tmp
COPY --from=build /opt/venv /opt/venv
USER {IMAGE_USER}
WORKDIR /tmp
EXPOSE {CONTAINER_PORT}
CMD {json.dumps(cmd)}
"""
