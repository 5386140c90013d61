"""``EnvPool`` over Pods of the real test cluster: a Pod deleted mid-run loses only its sessions, the
rest of the run goes on, the pool replaces the Pod through the provider, nothing is left behind."""

from __future__ import annotations

from typing import Any

import pytest

from openenv.interfaces import LaunchSpec, ProviderHandle
from openenv.pool import EnvPool
from openenv.testing import check_replica_loss

pytestmark = [pytest.mark.kubernetes, pytest.mark.slow,
              pytest.mark.requires_plugins("provider-docker", "transport-ws", "env-echo")]


async def test_a_pool_of_pods_survives_a_deleted_pod(provider: Any, kube: Any, echo_image: str) -> None:
    def kill(handle: ProviderHandle) -> None:  # behind the pool's back, as an operator or eviction would
        kube.core.delete_namespaced_pod(handle.id, kube.namespace, grace_period_seconds=0)

    async with EnvPool(provider=provider, launch=LaunchSpec(env="echo", startup_timeout_s=120), replicas=2,
                       health_interval_s=0.5) as pool:
        result = await check_replica_loss(pool, kill, timeout_s=180)
    assert result["episodes_ok"] == 6 and result["replacements"] >= 1
    assert kube.wait_no_leftovers() == []
