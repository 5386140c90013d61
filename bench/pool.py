"""Steps/s through an ``EnvPool`` against direct connections to the same servers, in the same run.

``python -m bench.pool [--quick] [--replicas 2] [--sessions 4] [--steps 2000] [--rounds 3]`` starts
``--replicas`` echo servers through the local provider, then alternates rounds of:

* ``direct`` — ``--sessions`` ``GenericEnvClient``s spread round-robin over the servers' URLs;
* ``pool`` — the same number of sessions from ``EnvPool(urls)`` (least-loaded placement, health
  monitor running), each stepping through the client the pool hands out.

Each session resets once and steps ``--steps`` times, all sessions concurrently. It prints steps/s
of each and the ratio pool/direct (issue 31's goal: >= 0.95). Placement and the health checks are
the pool's whole cost: a step goes over the same connection type either way.

Then a replica's death (``openenv.testing.check_replica_loss`` on two local servers, one SIGKILLed
mid-episode): the time from the kill to its session's ``SessionLostError`` (goal < 1 s) and to a
replacement serving, median of ``--kills`` runs.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

from openenv.client import GenericEnvClient
from openenv.interfaces import LaunchSpec
from openenv.pool import EnvPool

__all__ = ["main", "measure"]


async def _steps(client: Any, n: int) -> None:
    await client.reset()
    for i in range(n):
        await client.step({"message": str(i)})


async def _direct(urls: list[str], sessions: int, steps: int) -> float:
    clients = [GenericEnvClient(urls[i % len(urls)]) for i in range(sessions)]
    try:
        started = time.perf_counter()
        await asyncio.gather(*(_steps(c, steps) for c in clients))
        return sessions * steps / (time.perf_counter() - started)
    finally:
        for c in clients:
            await c.close()


async def _pooled(pool: EnvPool[Any, Any], sessions: int, steps: int) -> float:
    clients = [await pool.acquire() for _ in range(sessions)]
    try:
        started = time.perf_counter()
        await asyncio.gather(*(_steps(c, steps) for c in clients))
        return sessions * steps / (time.perf_counter() - started)
    finally:
        for c in clients:
            await pool.release(c)


async def measure(*, replicas: int, sessions: int, steps: int, rounds: int) -> dict[str, Any]:
    from openenv_provider_local.local import LocalProvider

    provider = LocalProvider()
    handles = [await asyncio.to_thread(provider.start, LaunchSpec(env="echo", max_sessions=sessions + 2))
               for _ in range(replicas)]
    try:
        urls = [h.base_url for h in handles]
        direct: list[float] = []
        pooled: list[float] = []
        async with EnvPool(urls, sessions_per_replica=sessions) as pool:
            for _ in range(rounds):  # alternating: a change in the machine's load falls on both
                direct.append(await _direct(urls, sessions, steps))
                pooled.append(await _pooled(pool, sessions, steps))
    finally:
        for h in handles:
            await asyncio.to_thread(h.stop)
    d, p = statistics.median(direct), statistics.median(pooled)
    return {"replicas": replicas, "sessions": sessions, "steps": steps, "rounds": rounds,
            "direct_steps_per_s": d, "pool_steps_per_s": p, "ratio": p / d}


async def death(kills: int) -> dict[str, float]:
    """Median seconds from a replica's SIGKILL to its session's ``SessionLostError`` and to the
    replacement serving (``check_replica_loss`` over the local provider, 0.2 s health checks)."""
    import os
    import signal

    from openenv.testing import check_replica_loss

    lost, replaced = [], []
    for _ in range(kills):
        async with EnvPool(env="echo", provider="local", replicas=2, health_interval_s=0.2) as pool:
            result = await check_replica_loss(pool, lambda h: os.killpg(int(h.pgid), signal.SIGKILL),  # type: ignore[attr-defined]
                                              episodes=2, timeout_s=60)
        lost.append(result["lost_after_s"])
        replaced.append(result["replaced_after_s"])
    return {"lost_s": statistics.median(lost), "replaced_s": statistics.median(replaced)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.pool", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a few hundred steps, one round (CI)")
    ap.add_argument("--replicas", type=int, default=2)
    ap.add_argument("--sessions", type=int, default=4)
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--kills", type=int, default=3, help="replica deaths measured (median)")
    args = ap.parse_args(argv)
    steps, rounds = (200, 1) if args.quick else (args.steps, args.rounds)
    row = asyncio.run(measure(replicas=args.replicas, sessions=args.sessions, steps=steps, rounds=rounds))
    print(f"pool over {row['replicas']} servers, {row['sessions']} sessions x {row['steps']} steps: "
          f"direct {row['direct_steps_per_s']:.0f} steps/s, pool {row['pool_steps_per_s']:.0f} steps/s, "
          f"ratio {row['ratio']:.3f} (goal >= 0.95)")
    dead = asyncio.run(death(1 if args.quick else args.kills))
    print(f"replica SIGKILLed: its session lost after {dead['lost_s'] * 1000:.0f} ms (goal < 1000 ms), "
          f"a replacement serving after {dead['replaced_s']:.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
