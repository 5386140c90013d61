"""``openenv build``: build the image of an env package with the Docker SDK, showing progress.

Promises:

* The image is tagged ``openenv-<env>:<version>`` and ``openenv-<env>:latest`` (``naming.image_tag``,
  the convention every provider uses), or only with ``tag`` when one is given.
* The base image is ``base_image``, else ``$OPENENV_BASE_IMAGE``, else ``python:3.11-slim``. It
  is never pulled again when present; a missing one is pulled by the engine as usual (the README
  shows how to make one offline instead).
* Nothing is rebuilt when the tagged image already carries the hash of the same inputs (sources of
  the local packages, base image id, Dockerfile); ``force=True`` rebuilds anyway.
* Progress goes to stderr (rich); a failing build raises ``BuildError`` with the engine's error and
  the last lines of output. The temporary build context is always removed (unless
  ``keep_context`` names a folder to write it to).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import tempfile
import time
from collections import deque
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openenv.errors import ConfigError
from openenv_provider_docker.context import (
    DEFAULT_BASE_IMAGE,
    collect_wheels,
    dockerfile,
    inputs_hash,
    local_packages,
    read_env_package,
)
from openenv_provider_docker.engine import connect
from openenv_provider_docker.naming import LABEL_BUILD_HASH, LABEL_BUILD_STAGE, image_tag

if TYPE_CHECKING:
    import docker
    from rich.console import Console

__all__ = ["BuildError", "BuildResult", "base_image_default", "build_image"]

_PY_TAG = re.compile(r"(?:^|/)python:(\d+\.\d+)")


class BuildError(RuntimeError):
    """The engine failed to build the image; the message has its error and the output's tail."""


@dataclass
class BuildResult:
    """What ``build_image`` produced."""

    tag: str
    tags: list[str]
    image_id: str
    env: str
    built: bool
    seconds: float
    base_image: str
    wheels: list[str] = field(default_factory=list)


def base_image_default() -> str:
    """``$OPENENV_BASE_IMAGE`` or the standard slim Python image."""
    return os.environ.get("OPENENV_BASE_IMAGE") or DEFAULT_BASE_IMAGE


def build_image(
    path: str | Path,
    *,
    tag: str | None = None,
    base_image: str | None = None,
    python: str = "python3",
    env: str | None = None,
    python_version: str | None = None,
    force: bool = False,
    no_cache: bool = False,
    verbose: bool = False,
    keep_context: str | Path | None = None,
    client: docker.DockerClient | None = None,
    console: Console | None = None,
) -> BuildResult:
    """Build (or find up to date) the image of the env package at ``path``."""
    started = time.monotonic()
    pkg = read_env_package(path, env)
    base = base_image or base_image_default()
    match = _PY_TAG.search(base)
    py_version = python_version or (match.group(1) if match else f"{sys.version_info[0]}.{sys.version_info[1]}")
    if not re.fullmatch(r"\d+\.\d+", py_version):
        raise ConfigError(f"--python-version {py_version!r}: expected MAJOR.MINOR, e.g. 3.11.")
    tags = [tag] if tag else [image_tag(pkg.env, pkg.version), image_tag(pkg.env, "latest")]
    out = console or _stderr_console()
    client = client or connect(timeout_s=600)
    base_id = _image_id(client, base)
    hash_ = inputs_hash(local_packages(pkg), base_id or base, py_version,
                        dockerfile(pkg, base_image=base, python=python, python_version=py_version))
    existing = _image(client, tags[0])
    if existing is not None and not force and not no_cache and base_id and (
            (existing.labels or {}).get(LABEL_BUILD_HASH) == hash_):
        for extra in tags[1:]:
            _tag(existing, extra)
        out.print(f"[green]✓[/] {tags[0]} is up to date (inputs unchanged; --force rebuilds)")
        return BuildResult(tags[0], tags, existing.id, pkg.env, False, time.monotonic() - started, base)

    context_dir = Path(keep_context) if keep_context else Path(tempfile.mkdtemp(prefix="openenv-build-"))
    try:
        if keep_context and context_dir.exists():
            shutil.rmtree(context_dir)
        wheels_dir = context_dir / "wheels"
        status = out.status("preparing", spinner="dots") if out.is_terminal else nullcontext()
        with status as spinner:
            def progress(message: str) -> None:
                if spinner is not None:
                    spinner.update(message)
                elif verbose:
                    out.print(f"  {message}")

            out.print(f"Building [bold]{tags[0]}[/] from {pkg.path} (env '{pkg.env}', base {base}, "
                      f"Python {py_version})")
            collect_wheels(pkg, wheels_dir, python_version=py_version, progress=progress)
            wheels = sorted(p.name for p in wheels_dir.glob("*.whl"))
            out.print(f"[green]✓[/] {len(wheels)} wheels collected")
            (context_dir / "Dockerfile").write_text(
                dockerfile(pkg, base_image=base, python=python, python_version=py_version,
                           build_hash=hash_), encoding="utf-8")
            image_id = _docker_build(client, context_dir, tags[0], pkg.env, no_cache=no_cache, verbose=verbose,
                                     console=out, progress=progress)
        image = client.images.get(image_id)
        for extra in tags[1:]:
            _tag(image, extra)
        if existing is not None and existing.id != image.id:
            _remove_if_untagged(client, existing.id)
        seconds = time.monotonic() - started
        out.print(f"[green]✓[/] built {', '.join(tags)} ({image.id[7:19]}) in {seconds:.1f}s")
        return BuildResult(tags[0], tags, image.id, pkg.env, True, seconds, base, wheels)
    finally:
        if not keep_context:
            shutil.rmtree(context_dir, ignore_errors=True)


def _docker_build(client: docker.DockerClient, context_dir: Path, tag: str, env: str, *, no_cache: bool,
                  verbose: bool, console: Console, progress: Any) -> str:
    from docker.errors import APIError

    tail: deque[str] = deque(maxlen=40)
    image_id: str | None = None
    seen_ids: set[str] = set()
    try:
        stream = client.api.build(path=str(context_dir), tag=tag, rm=True, forcerm=True, pull=False,
                                  nocache=no_cache, decode=True)
        for chunk in stream:
            if "error" in chunk or "errorDetail" in chunk:
                detail = (chunk.get("errorDetail") or {}).get("message") or chunk.get("error")
                raise BuildError(_build_failure(tag, str(detail), tail))
            text = chunk.get("stream") or chunk.get("status") or ""
            if "aux" in chunk and isinstance(chunk["aux"], dict) and chunk["aux"].get("ID"):
                image_id = chunk["aux"]["ID"]
            for line in text.splitlines():
                line = line.rstrip()
                if not line:
                    continue
                tail.append(line)
                if line[:5].lower() == "step ":  # "Step 2/9" (Docker), "STEP 2/9" (Podman)
                    progress(line[:100])
                    if not verbose:
                        console.print(f"  [dim]{_escape(line[:120])}[/]", soft_wrap=True)
                if verbose:
                    console.print(f"  {_escape(line)}", highlight=False, soft_wrap=True)
                layer = re.match(r"\s*---> ([0-9a-f]{12})$", line)
                if layer:
                    seen_ids.add(layer.group(1))
                found = re.match(r"Successfully built ([0-9a-f]+)", line)
                if found:
                    image_id = image_id or found.group(1)
    except APIError as exc:
        raise BuildError(_build_failure(tag, str(exc.explanation or exc), tail)) from None
    if image_id is None:
        # Podman reports the id differently; the tag is authoritative.
        image_id = client.images.get(tag).id
    _prune_stages(client, env, seen_ids)
    return image_id


def _remove_if_untagged(client: docker.DockerClient, image_id: str) -> None:
    """Delete the image the new build replaced, unless it still has a tag or a container."""
    from docker.errors import APIError

    try:
        if not client.images.get(image_id).tags:
            client.images.remove(image_id)
    except APIError:
        pass  # still used by a container, or already gone


def stage_tag(env: str) -> tuple[str, str]:
    """Repository and tag of ``env``'s first build stage (``openenv-<env>:build-stage``): kept as the
    next build's layer cache, under a name, so ``docker images`` shows no untagged ``<none>`` image."""
    repository = image_tag(env, "latest").rsplit(":", 1)[0]
    return repository, "build-stage"


#: Untagged first stages younger than this may belong to a build still running; they are left alone.
STALE_STAGE_S = 3600.0


def _created(image: Any) -> float:
    """When ``image`` was created (seconds since the epoch); now when the engine does not say."""
    from datetime import datetime

    raw = str(image.attrs.get("Created", ""))  # RFC 3339 with nanoseconds: "2026-12-05T01:10:11.123456789Z"
    try:
        return datetime.fromisoformat(re.sub(r"\.\d+", "", raw).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return time.time()


def _prune_stages(client: docker.DockerClient, env: str, keep: set[str]) -> None:
    """Delete superseded first-stage images of ``env``; the one just used is the cache: it is tagged
    ``stage_tag(env)``, and the one that tag named before is deleted too (no untagged image left)."""
    from docker.errors import APIError, ImageNotFound

    repository, tag = stage_tag(env)
    try:
        previous = client.images.get(f"{repository}:{tag}").id
    except (ImageNotFound, APIError):
        previous = None
    try:
        stale = client.images.list(filters={"label": f"{LABEL_BUILD_STAGE}={env}", "dangling": True})
    except APIError:
        return
    kept = None
    for image in stale:
        if image.id.split(":")[-1][:12] in keep:
            try:
                image.tag(repository, tag=tag)
                kept = image.id
            except APIError:
                pass
    # Another build of the same env may be running on this engine right now, with its first stage
    # still untagged: only stale stages older than STALE_STAGE_S are deleted here, so a concurrent
    # build never loses the image it is building on (its own prune tags or deletes it later).
    cutoff = time.time() - STALE_STAGE_S
    doomed = [i.id for i in stale if i.id != kept and _created(i) < cutoff]
    if previous is not None and kept is not None and previous != kept:
        doomed.append(previous)  # the tag moved: the stage it named is untagged now
    for image_id in doomed:
        try:
            client.images.remove(image_id)
        except APIError:
            pass  # in use by a concurrent build, or already gone: harmless


def _build_failure(tag: str, detail: str, tail: deque[str]) -> str:
    hint = ""
    if re.search(r"pull access denied|manifest unknown|no such host|dial tcp|i/o timeout|"
                 r"connection refused|not found: manifest", detail, re.IGNORECASE):
        hint = ("\nThe base image could not be pulled. Make one offline and pass it with "
                "--base-image (or OPENENV_BASE_IMAGE), e.g.\n"
                "  debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates "
                "bookworm /tmp/rootfs\n  tar -C /tmp/rootfs -c . | docker import - openenv-base:bookworm")
    lines = "\n".join(tail)
    return f"Building {tag} failed: {detail}{hint}\n--- last build output ---\n{lines}"


def _image(client: docker.DockerClient, ref: str) -> Any:
    from docker.errors import ImageNotFound

    try:
        return client.images.get(ref)
    except ImageNotFound:
        return None


def _image_id(client: docker.DockerClient, ref: str) -> str | None:
    image = _image(client, ref)
    return image.id if image is not None else None


def _tag(image: Any, ref: str) -> None:
    repo, _, tag = ref.rpartition(":")
    if not repo or "/" in tag:
        repo, tag = ref, "latest"
    image.tag(repo, tag)


def _stderr_console() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)
