"""Fixtures for the swarm provider tests (shared with the docker provider's tests)."""

from __future__ import annotations

from typing import Any

import pytest

from openenv_provider_docker.fixtures import (  # noqa: F401 - fixtures
    docker_client,
    echo_dir,
    echo_image,
    no_leftover_containers,
)
from openenv_provider_docker.testing import skip_unless_required


@pytest.fixture(scope="session")
def swarm_client(docker_client: Any) -> Any:  # noqa: F811
    """The engine client, if it is a Swarm manager (else the test is skipped with the reason)."""
    from openenv_provider_docker.testing import swarm_skip_reason

    reason = swarm_skip_reason(docker_client)
    if reason:
        skip_unless_required(reason)
    return docker_client
