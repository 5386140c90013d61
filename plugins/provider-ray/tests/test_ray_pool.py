"""``EnvPool`` over Ray actors of a real local Ray cluster of two nodes (a head and a worker node
started separately, both on 127.0.0.1; see ``conftest.py``): an actor killed mid-run loses only its
sessions, the run goes on with the right counts, the pool replaces the actor through the provider,
and no actor is left."""

from __future__ import annotations

from typing import Any

import pytest

from openenv.interfaces import LaunchSpec, ProviderHandle
from openenv.pool import EnvPool
from openenv.testing import check_replica_loss
from openenv_provider_ray.provider import RayHandle, RayProvider
from openenv_provider_ray.testing import LocalRayHead

pytestmark = [pytest.mark.slow, pytest.mark.requires_plugins("env-echo", "transport-ws")]


def _kill(handle: ProviderHandle) -> None:
    """Kill the replica's actor behind the pool's back."""
    import ray

    assert isinstance(handle, RayHandle)
    ray.kill(handle.actor, no_restart=True)


def _named_actors() -> list[str]:
    import ray

    return sorted(f"{a['namespace']}/{a['name']}" for a in ray.util.list_named_actors(all_namespaces=True))


async def test_a_pool_of_actors_survives_a_killed_actor(ray_head: LocalRayHead) -> None:
    before = _named_actors()
    spec = LaunchSpec(env="echo", options={"cpus": 0.25}, startup_timeout_s=120.0)
    async with EnvPool(provider=RayProvider(), launch=spec, replicas=2, health_interval_s=0.3) as pool:
        result = await check_replica_loss(pool, _kill, timeout_s=120)
    assert result["episodes_ok"] == 6 and result["replacements"] >= 1
    assert RayProvider().ps() == []
    assert _named_actors() == before


def _node_ids(pool: EnvPool[Any, Any]) -> list[str]:
    ids = []
    for replica in pool.replicas():
        assert isinstance(replica.handle, RayHandle) and replica.handle.node_id
        ids.append(replica.handle.node_id)
    return sorted(ids)


async def test_a_pool_spread_over_two_nodes_survives_a_killed_actor(ray_head: LocalRayHead) -> None:
    import ray

    nodes = sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])
    assert len(nodes) == 2, f"the fixture's cluster should have two nodes: {ray.nodes()}"
    before = _named_actors()
    # The fixture gave each node one slot (a custom resource): the two replicas (and the one
    # replacing the killed actor) take a node each.
    (slot,) = ray_head.resources
    spec = LaunchSpec(env="echo", options={"cpus": 0.25, "placement": "spread", "resources": {slot: 1}},
                      startup_timeout_s=120.0)
    async with EnvPool(provider=RayProvider(), launch=spec, replicas=2, health_interval_s=0.3) as pool:
        assert _node_ids(pool) == nodes
        result = await check_replica_loss(pool, _kill, timeout_s=120)
        assert _node_ids(pool) == nodes  # the replacement took the freed node's slot
        assert len(_named_actors()) == len(before) + 2
    assert result["episodes_ok"] == 6 and result["replacements"] == 1
    assert result["lost_after_s"] is not None
    assert RayProvider().ps() == []
    assert _named_actors() == before
