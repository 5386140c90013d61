"""``check_replica_loss``: what a pool must survive on any engine — one of its replicas killed behind
its back mid-run (a Pod deleted, an actor killed, a container killed, a process SIGKILLed).

The check, against an ``EnvPool`` of at least two replicas started by a provider:

1. two sessions are placed on two different replicas, reset and stepped;
2. ``kill(handle)`` kills the first one's replica (``handle`` is the provider's, from
   ``EnvPool.replicas()``);
3. that session's next step raises ``SessionLostError`` (the time from the kill is measured);
   the other session finishes its episode untouched;
4. the lost episode and the rest of ``episodes`` are played on new sessions of the pool;
5. the pool replaces the dead replica through its provider, and the replacement serves.

Returns what happened (``episodes_ok``, ``lost_after_s``, ``replaced_after_s`` — from the kill to
the replacement serving —, ``replacement_url``, ``replacements``);
raises ``ContractError`` naming the broken promise. The caller counts leftovers (Pods, actors,
containers) before and after, since only it knows the engine.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from openenv.client import GenericEnvClient
from openenv.errors import SessionLostError
from openenv.interfaces import ProviderHandle
from openenv.pool import EnvPool
from openenv.testing.errors import ContractError, expect

__all__ = ["check_replica_loss"]


async def _episode(pool: EnvPool[Any, Any], action: dict[str, Any], steps: int) -> None:
    async with pool.session() as env:
        await env.reset()
        for _ in range(steps):
            await env.step(action)


async def check_replica_loss(pool: EnvPool[Any, Any], kill: Callable[[ProviderHandle], None], *,
                             episodes: int = 6, steps: int = 3, action: dict[str, Any] | None = None,
                             timeout_s: float = 240.0) -> dict[str, Any]:
    """Run the check (see the module docs) on a started ``pool``; ``action`` defaults to the echo
    env's. ``timeout_s`` bounds each wait (the lost step, the replacement)."""
    action = action or {"message": "hi"}
    first, second = await pool.acquire(), await pool.acquire()
    try:
        expect(first.base_url != second.base_url,
               f"two sessions of a pool of {len(pool.replicas())} replicas went to the same one: {first.base_url}")
        for env in (first, second):
            await env.reset()
            await env.step(action)
        originals = {r.url for r in pool.replicas()}
        (victim,) = [r for r in pool.replicas() if r.url == first.base_url]
        expect(victim.handle is not None, "the replica to kill was not started by the pool's provider")
        assert victim.handle is not None
        await asyncio.to_thread(kill, victim.handle)
        killed_at = time.monotonic()
        lost_after: float | None = None
        while time.monotonic() - killed_at < timeout_s:
            try:
                await asyncio.wait_for(first.step(action), timeout_s)
            except SessionLostError:
                lost_after = time.monotonic() - killed_at
                break
            await asyncio.sleep(0.05)  # the step landed before the replica died: try again
        expect(lost_after is not None, f"a session on the killed replica never raised SessionLostError "
                                       f"within {timeout_s:g}s")
        for _ in range(steps - 1):  # the other replica's session is untouched
            await second.step(action)
    finally:
        await pool.release(first)
        await pool.release(second)
    ok = 1  # the survivor's episode
    for _ in range(episodes - 1):  # the lost episode again, then the rest
        await _episode(pool, action, steps)
        ok += 1
    deadline = time.monotonic() + timeout_s
    replacement = None
    while time.monotonic() < deadline:
        fresh = [r for r in pool.replicas() if r.healthy and r.url not in originals]
        if pool.replacements >= 1 and fresh:
            replacement = fresh[0].url
            break
        await asyncio.sleep(0.2)
    if replacement is None:
        raise ContractError(f"the killed replica was not replaced within {timeout_s:g}s: {pool.replicas()}")
    async with GenericEnvClient(replacement, **_auth(pool)) as env:  # the replacement serves
        await env.reset()
        await env.step(action)
    return {"episodes_ok": ok, "lost_after_s": lost_after, "replaced_after_s": time.monotonic() - killed_at,
            "replacement_url": replacement, "replacements": pool.replacements}


def _auth(pool: EnvPool[Any, Any]) -> dict[str, Any]:
    token = pool._client_kwargs.get("token")
    return {"token": token} if token else {}
