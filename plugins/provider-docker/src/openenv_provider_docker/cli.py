"""The ``openenv build`` command (registered by this plugin through ``openenv_register_commands``).

Exit codes: 0 built (or already up to date), 2 bad input (no env package at PATH, a bad option),
1 the build failed or no engine answers. The image tag is printed on stdout (and only it), so
``TAG=$(openenv build envs/echo)`` works; progress goes to stderr.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

__all__ = ["build"]


def build(
    path: Annotated[Path, typer.Argument(help="Folder of the env package (its pyproject.toml registers "
                                         "an `openenv` entry point).")] = Path("."),
    tag: Annotated[str | None, typer.Option("--tag", "-t", help="Image tag (default: "
                                            "openenv-<env>:<version> and openenv-<env>:latest).",
                                            show_default=False)] = None,
    base_image: Annotated[str | None, typer.Option(
        "--base-image", envvar="OPENENV_BASE_IMAGE", show_envvar=True,
        help="Base image with Python and venv (default: python:3.11-slim).", show_default=False)] = None,
    python: Annotated[str, typer.Option("--python", help="Python command inside the base image.")] = "python3",
    env: Annotated[str | None, typer.Option("--env", help="Env to serve when the package registers "
                                            "several (default: its openenv.yaml name).",
                                            show_default=False)] = None,
    python_version: Annotated[str | None, typer.Option(
        "--python-version", help="Python MAJOR.MINOR of the base image, for the wheels (default: "
        "from a python:X.Y base tag, else this interpreter's).", show_default=False)] = None,
    force: Annotated[bool, typer.Option("--force", help="Rebuild even if the inputs are unchanged.")] = False,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not use the engine's layer cache.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show the engine's full build output.")] = False,
    keep_context: Annotated[Path | None, typer.Option(
        "--keep-context", help="Write the build context (Dockerfile, wheels) to this folder and keep it.",
        show_default=False)] = None,
) -> None:
    """Build a container image for an env package; its wheels are collected on the host, so the
    image build itself needs no network."""
    from openenv.cli.output import EXIT_ERROR, EXIT_USAGE, fail
    from openenv.errors import ConfigError
    from openenv_provider_docker.build import BuildError, build_image
    from openenv_provider_docker.engine import EngineUnavailable

    if not path.is_dir():
        fail(f"{path} is not a folder: pass the folder of an env package, e.g. `openenv build envs/echo`.",
             EXIT_USAGE)
    try:
        result = build_image(path, tag=tag, base_image=base_image, python=python, env=env,
                             python_version=python_version, force=force, no_cache=no_cache,
                             verbose=verbose, keep_context=keep_context)
    except ConfigError as exc:
        fail(str(exc), EXIT_USAGE)
    except (BuildError, EngineUnavailable) as exc:
        fail(str(exc), EXIT_ERROR)
    typer.echo(result.tag)
