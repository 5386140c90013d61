"""Collect throughput against raw stepping of the same env, in the same run.

``python -m bench.collect [--quick] [--json]``

One grid_world server (local provider) holds 64+ sessions. Two loads alternate on it, each
``rounds`` times: **raw** — 64 concurrent clients reset and step episodes with the first legal
move and record nothing; **collect** — ``openenv_rollouts.collect_async`` with the ``first`` policy
and 64 concurrent sessions, writing every episode (steps, observations, timings) to a JSONL file
fsynced per episode. Both play the same episodes (same step limit). The number is steps/s; the
ratio is collect / raw (goal ≥ 0.8). Upstream 0.10's collect is not measured here (it is wired to
two env families upstream, neither of which it can run here).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["main", "raw_steps_per_s", "collect_steps_per_s"]

ENV = "grid_world"
CONCURRENCY = 64


async def raw_steps_per_s(base_url: str, token: str, *, episodes: int, max_steps: int) -> float:
    from openenv.client import GenericEnvClient

    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(episodes):
        queue.put_nowait(i)
    steps = 0

    async def worker() -> None:
        nonlocal steps
        async with GenericEnvClient(base_url, token=token) as client:
            while not queue.empty():
                i = queue.get_nowait()
                result = await client.reset(seed=i)
                t = 0
                while not result.done and t < max_steps:
                    result = await client.step({"move": result.observation["legal_actions"][0]})
                    t += 1
                steps += t

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(CONCURRENCY)))
    return steps / (time.perf_counter() - started)


def _remove(path: Path) -> None:
    path.unlink(missing_ok=True)


async def collect_steps_per_s(base_url: str, token: str, *, episodes: int, max_steps: int, out: Path) -> float:
    from openenv_rollouts import collect_async

    _remove(out)
    summary = await collect_async(ENV, base_url=base_url, token=token, episodes=episodes, concurrency=CONCURRENCY,
                                  output=out, policy="first", seed=0, max_steps=max_steps, max_errors=0)
    assert summary.ok == episodes, summary.to_json()
    return summary.steps_per_s


async def _run(*, episodes: int, rounds: int, max_steps: int) -> dict[str, Any]:
    from openenv_rollouts.server import EnvServer

    server = await EnvServer.start(ENV, max_sessions=CONCURRENCY * 2 + 2)
    raw: list[float] = []
    col: list[float] = []
    try:
        token = str(server.token)
        with tempfile.TemporaryDirectory(prefix="bench-collect-") as tmp:
            await raw_steps_per_s(server.base_url, token, episodes=CONCURRENCY, max_steps=5)  # warm-up
            for _ in range(rounds):
                raw.append(await raw_steps_per_s(server.base_url, token, episodes=episodes, max_steps=max_steps))
                col.append(await collect_steps_per_s(server.base_url, token, episodes=episodes,
                                                     max_steps=max_steps, out=Path(tmp) / "r.jsonl"))
    finally:
        await server.stop()
    raw_m, col_m = statistics.median(raw), statistics.median(col)
    return {"schema": "openenv.bench.collect/1", "env": ENV, "concurrency": CONCURRENCY, "episodes": episodes,
            "rounds": rounds, "max_steps": max_steps, "raw_steps_per_s": round(raw_m, 1),
            "collect_steps_per_s": round(col_m, 1), "ratio": round(col_m / raw_m, 3), "goal": 0.8,
            "raw_rounds": [round(x, 1) for x in raw], "collect_rounds": [round(x, 1) for x in col]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.collect", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="Fewer episodes and rounds (~20 s).")
    parser.add_argument("--json", action="store_true", help="Print the result as JSON.")
    args = parser.parse_args(argv)
    episodes, rounds = (256, 2) if args.quick else (1024, 5)
    result = asyncio.run(_run(episodes=episodes, rounds=rounds, max_steps=20))
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"collect on {ENV}, {CONCURRENCY} sessions, {episodes} episodes x {rounds} rounds")
        print(f"  raw stepping   {result['raw_steps_per_s']:>10.1f} steps/s")
        print(f"  openenv collect{result['collect_steps_per_s']:>10.1f} steps/s")
        print(f"  ratio          {result['ratio']:>10.3f}  (goal >= {result['goal']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
