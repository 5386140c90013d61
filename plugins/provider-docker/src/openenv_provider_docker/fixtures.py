"""Pytest fixtures for real-engine tests of container providers (opt-in; imports pytest).

Import them in a ``conftest.py``::

    from openenv_provider_docker.fixtures import (  # noqa: F401
        docker_client, echo_dir, echo_image, no_leftover_containers)

* ``docker_client`` (session) – a connected engine client; skips with the reason when no engine
  answers. When the session ends it fails if anything labelled with this run's
  ``testing.RUN_LABELS``, or owned by this process, is left in the engine.
* ``echo_dir`` (session) – the echo env package's folder in this workspace (skips if absent).
* ``echo_image`` (session) – the echo image's tag, built once (or found up to date) on
  ``testing.base_image_for_tests``; skips when no base image is present.
* ``no_leftover_containers`` – fails a test that leaves a container or service of this run.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from openenv.interfaces import owner_id
from openenv_provider_docker.context import find_workspace
from openenv_provider_docker.testing import RUN_LABELS, skip_unless_required

__all__ = ["docker_client", "echo_dir", "echo_image", "no_leftover_containers"]


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    """A connected engine client; skips when there is none (see the module docstring)."""
    from openenv_provider_docker.engine import connect
    from openenv_provider_docker.testing import engine_skip_reason, wait_for_no_leftovers

    reason = engine_skip_reason()
    if reason:
        skip_unless_required(reason)
    client = connect()
    yield client
    left = wait_for_no_leftovers(client, labels=RUN_LABELS, owners={owner_id()})
    client.close()
    assert not left, f"the docker tests left resources behind: {left}"


@pytest.fixture(scope="session")
def echo_dir() -> Path:
    """The echo env package of this workspace (found from the tests' or this package's folder)."""
    for start in (Path.cwd(), Path(__file__).resolve().parent):
        folder = find_workspace(start).get("openenvkit-env-echo")
        if folder is not None:
            return folder
    pytest.skip("the echo env package's sources are not in a workspace around here")


@pytest.fixture(scope="session")
def echo_image(docker_client: Any, echo_dir: Path) -> str:
    """Tag of the echo env image, built (or found up to date) once per session."""
    from rich.console import Console

    from openenv_provider_docker.build import build_image
    from openenv_provider_docker.testing import base_image_for_tests

    base = base_image_for_tests(docker_client)
    if base is None:
        skip_unless_required("no base image to build on: run .ci/docker-setup.sh (makes openenv-base:bookworm "
                    "offline) or set OPENENV_BASE_IMAGE")
    return build_image(echo_dir, base_image=base, client=docker_client,
                       console=Console(file=io.StringIO())).tag


@pytest.fixture
def no_leftover_containers(docker_client: Any) -> Iterator[None]:
    """Fail the test if it leaves a container or service of this run behind."""
    from openenv_provider_docker.testing import leftovers

    yield
    left = {k: v for k, v in leftovers(docker_client, labels=RUN_LABELS).items() if k != "networks"}
    assert not left, f"test left resources behind: {left}"
