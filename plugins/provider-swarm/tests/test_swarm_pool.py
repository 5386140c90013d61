"""``EnvPool`` over Swarm services: a task container killed mid-run loses only its sessions, the run
goes on, the pool replaces the replica through the provider, nothing is left behind (the fixture
counts containers)."""

from __future__ import annotations

from typing import Any

import pytest

from openenv.interfaces import ProviderHandle
from openenv.pool import EnvPool
from openenv.testing import check_replica_loss
from openenv_provider_docker.testing import echo_spec
from openenv_provider_swarm.provider import SwarmProvider

pytestmark = [pytest.mark.docker, pytest.mark.usefixtures("no_leftover_containers"),
              pytest.mark.requires_plugins("transport-ws", "env-echo")]


async def test_a_pool_of_services_survives_a_killed_container(swarm_client: Any, echo_image: str) -> None:
    def kill(handle: ProviderHandle) -> None:  # the task's container, behind the pool's back
        (container,) = swarm_client.containers.list(filters={"label": f"com.docker.swarm.service.id={handle.id}"})
        container.kill()

    async with EnvPool(provider=SwarmProvider(swarm_client), launch=echo_spec(echo_image), replicas=2,
                       health_interval_s=0.3) as pool:
        result = await check_replica_loss(pool, kill, timeout_s=120)
    assert result["episodes_ok"] == 6 and result["replacements"] >= 1
