"""Fixtures for the docker provider and ``openenv build`` tests (shared with the swarm provider's
tests and tests/docker through ``openenv_provider_docker.fixtures``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from openenv_provider_docker.fixtures import (  # noqa: F401 - fixtures
    docker_client,
    echo_dir,
    echo_image,
    no_leftover_containers,
)


@pytest.fixture(scope="session")
def repo_root(echo_dir: Path) -> Path:  # noqa: F811
    return echo_dir.parents[1]
