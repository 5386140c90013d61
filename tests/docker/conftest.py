"""Fixtures for the cross-package real-engine tests: the docker and swarm providers driven by the
kernel's client, the ``openenv`` command line, and clients killed with SIGKILL."""

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


@pytest.fixture(params=["docker", "swarm"])
def provider_name(request: pytest.FixtureRequest, docker_client: Any) -> str:  # noqa: F811
    """Each container provider in turn (swarm only on a Swarm manager)."""
    if request.param == "swarm":
        from openenv_provider_docker.testing import swarm_skip_reason

        reason = swarm_skip_reason(docker_client)
        if reason:
            skip_unless_required(reason)
    return str(request.param)


@pytest.fixture
def provider(provider_name: str, docker_client: Any) -> Any:  # noqa: F811
    """The provider instance, through the plugin registry (as the CLI and the client get it)."""
    from openenv.plugins import get_plugin_manager

    return get_plugin_manager().catalog.providers.load(provider_name)(docker_client)
