"""``openenv push PATH|IMAGE``: publish an env to an OCI registry or to a Hugging Face Space.

* ``--registry HOST:PORT/NAME[:TAG]`` – ``PATH`` (an env package folder) is built first with the
  docker provider's ``openenv build`` machinery (``openenvkit-provider-docker``); an ``IMAGE``
  already in the engine is used as it is. The image is tagged ``HOST:PORT/NAME:TAG`` (``TAG``
  defaults to the image's own tag) and pushed with the Docker SDK; the engine's push errors (an
  unreachable registry, one that wants TLS: add it to the engine's ``insecure-registries``) end
  the command with one ``error:`` line.
* ``--hf-space USER/NAME`` – ``PATH`` is uploaded to a Docker Space through ``huggingface_hub``
  (``create_repo(..., repo_type="space", space_sdk="docker", exist_ok=True)`` then
  ``upload_folder``): the package's files plus a ``Dockerfile`` and a README whose front matter
  declares ``sdk: docker`` and ``app_port: 8000`` when the package has none. ``HF_TOKEN`` and
  ``HF_ENDPOINT`` are read by ``huggingface_hub`` as usual.
* ``--dry-run`` prints, as JSON, exactly what would be sent (image, tags and registry; or the Space,
  its settings and every file with its size) and sends nothing (nothing is built either).

Prints `✓ pushed REF (DIGEST)` on stderr for each reference sent and the references alone on stdout.
A package folder is built on `--base-image` (or `$OPENENV_BASE_IMAGE`), as `openenv build` does.

Exit codes: 0 pushed (or dry run), 2 bad input, 1 the build or the push failed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any

import typer

from openenv.cli.output import EXIT_ERROR, EXIT_USAGE, console, fail, print_json

__all__ = ["parse_registry", "plan_registry_push", "push", "push_image"]

_REGISTRY = re.compile(r"(?P<host>[A-Za-z0-9.-]+(?::\d+)?)/(?P<name>[a-z0-9][a-z0-9._/-]*?)"
                       r"(?::(?P<tag>[\w][\w.-]{0,127}))?\Z")


def parse_registry(value: str) -> tuple[str, str, str | None]:
    """``HOST:PORT/NAME[:TAG]`` -> (host, repository ``HOST:PORT/NAME``, tag or None)."""
    match = _REGISTRY.match(value)
    if match is None:
        raise ValueError(f"--registry {value!r}: expected HOST:PORT/NAME[:TAG], e.g. 127.0.0.1:5000/my_env:0.1.0 "
                         "(a lower-case repository name).")
    host, name = match["host"], match["name"]
    return host, f"{host}/{name}", match["tag"]


def _docker() -> Any:
    import openenv_provider_docker.build as build

    return build


def plan_registry_push(source: str, registry: str, *, base_image: str | None = None) -> dict[str, Any]:
    """What a push would do, without building or sending anything."""
    host, repository, tag = parse_registry(registry)
    path = Path(source)
    plan: dict[str, Any] = {"registry": host, "source": source, "build": None}
    if path.is_dir():
        from openenv_provider_docker.context import read_env_package
        from openenv_provider_docker.naming import image_tag

        pkg = read_env_package(path)
        local = image_tag(pkg.env, pkg.version)
        plan["build"] = {"path": str(path.resolve()), "env": pkg.env, "dist": pkg.dist, "version": pkg.version,
                         "base_image": base_image or _docker().base_image_default()}
    else:
        local = source
    local_tag = local.rpartition(":")[2] if ":" in local.rpartition("/")[2] else "latest"
    plan["image"] = local
    plan["push"] = [f"{repository}:{tag or local_tag}"]
    return plan


def push_image(plan: dict[str, Any]) -> list[tuple[str, str | None]]:
    """Build (when the plan says so), tag and push; return each pushed reference with the digest
    the registry gave it (``None`` when the engine did not report one)."""
    build = _docker()
    from openenv_provider_docker.engine import connect

    if plan["build"] is not None:
        result = build.build_image(plan["build"]["path"], base_image=plan["build"]["base_image"])
        plan["image"] = result.tag
    client = connect(timeout_s=600)
    image = client.images.get(plan["image"])
    pushed: list[tuple[str, str | None]] = []
    for ref in plan["push"]:
        repository, _, tag = ref.rpartition(":")
        image.tag(repository, tag=tag)
        digest = None
        for line in client.images.push(repository, tag=tag, stream=True, decode=True):
            error = line.get("error") or (line.get("errorDetail") or {}).get("message")
            if error:
                raise RuntimeError(f"the engine could not push {ref}: {error}")
            digest = (line.get("aux") or {}).get("Digest") or digest
        pushed.append((ref, digest))
    return pushed


def push(
    source: Annotated[str, typer.Argument(help="Env package folder (built first) or an image in the engine.")],
    registry: Annotated[str | None, typer.Option("--registry", help="OCI registry target HOST:PORT/NAME[:TAG].",
                                                 show_default=False)] = None,
    hf_space: Annotated[str | None, typer.Option("--hf-space", help="Hugging Face Space USER/NAME (Docker SDK).",
                                                 show_default=False)] = None,
    private: Annotated[bool, typer.Option("--private", help="With --hf-space: create a private Space.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print what would be sent (JSON); send nothing.")] = False,
    base_image: Annotated[str | None, typer.Option(
        "--base-image", envvar="OPENENV_BASE_IMAGE", show_envvar=True,
        help="With a package folder: the base image to build on, as `openenv build --base-image` "
             "(default: python:3.11-slim).", show_default=False)] = None,
) -> None:
    """Publish an env: build and push its image to an OCI registry, or upload it to a HF Space."""
    if (registry is None) == (hf_space is None):
        fail("pass exactly one of --registry HOST:PORT/NAME[:TAG] or --hf-space USER/NAME.", EXIT_USAGE)
    if hf_space is not None:
        from openenv_provider_docker.push_hf import plan_space, upload_space

        if not Path(source).is_dir():
            fail(f"{source} is not a folder: --hf-space uploads an env package folder.", EXIT_USAGE)
        try:
            space_plan = plan_space(Path(source), hf_space, private=private)
        except ValueError as exc:
            fail(str(exc), EXIT_USAGE)
        if dry_run:
            print_json({"dry_run": True, **space_plan.to_json()})
            return
        try:
            url = upload_space(space_plan)
        except ImportError:
            fail("--hf-space needs huggingface_hub: `pip install 'openenvkit-provider-docker[hf]'` (or "
                 "`pip install huggingface_hub`).", EXIT_USAGE)
        except Exception as exc:
            fail(f"upload to the Space {hf_space} failed: {type(exc).__name__}: {exc}", EXIT_ERROR)
        console(stderr=True).print(f"uploaded {len(space_plan.files)} files to {hf_space}")
        typer.echo(url)
        return
    assert registry is not None
    from openenv.errors import ConfigError

    _docker()
    try:
        plan = plan_registry_push(source, registry, base_image=base_image)
    except (ValueError, ConfigError) as exc:
        fail(str(exc), EXIT_USAGE)
    if dry_run:
        print_json({"dry_run": True, **plan})
        return
    from openenv_provider_docker.engine import EngineUnavailable

    try:
        pushed = push_image(plan)
    except (EngineUnavailable, RuntimeError) as exc:
        fail(str(exc), EXIT_ERROR)
    except Exception as exc:  # docker.errors.* (image not found, API errors): one readable line
        fail(f"push failed: {type(exc).__name__}: {exc}", EXIT_ERROR)
    err = console(stderr=True)
    for ref, digest in pushed:
        err.print(f"[green]✓[/] pushed {ref}" + (f" ({digest})" if digest else ""))
        typer.echo(ref)  # stdout: only the references, for scripts
