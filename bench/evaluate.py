"""Tasks, eval and the sampler: ``openenv eval`` against ``collect``, the Task API against ``/health``,
and the share of zero-variance groups under uniform vs by-signal sampling.

``python -m bench.evaluate [--quick] [--json]``

**Eval vs collect** (goal ≥ 0.9×). One server of ``TaskGrid`` (grid_world with seed tasks,
``bench.evaluate:TaskGrid``) holds the sessions; rounds alternate ``collect_async`` (``first``
policy, 32 sessions, ``episodes`` episodes, seeds as resets) and ``evaluate_async`` on its
``test`` split with the same policy, concurrency and episode count (tasks × k), both writing every
episode. Steps/s of each; the ratio eval / collect per round, median over the rounds.

**Task API latency.** On the same server with a 10,000-task ``train`` split: ``GET /health``,
``POST /tasks`` (the split's list), ``POST /task_by_id`` (one task by id) and ``POST /task``
(one by index), each timed from a client
over ``rounds`` calls; p50 in ms, and each Task API route as a multiple of ``/health`` measured in
the same run.

**Sampler simulation** (goal: by-signal ≤ ½ of uniform). No server: 200 tasks whose success rates
are drawn once, seeded (45 % never solved, 35 % always solved, 20 % in between, the shape RFC 013
describes: most GRPO groups have no gradient under uniform sampling); 3,000 groups of 8, each
member succeeding with its task's rate. The number is the share of groups whose members all
succeeded or all failed, uniform and by-signal (``openenv_rollouts.sampler``), same seeds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from openenv.tasks import SeedTasks
from openenv_env_grid_world.env import GridWorldEnv

__all__ = ["TaskGrid", "main", "zero_variance_share"]

CONCURRENCY = 32
TEST_TASKS = 64


class TaskGrid(GridWorldEnv):
    """grid_world with procedural tasks: a 10,000-seed train split and a small test split."""

    tasks = SeedTasks({"train": range(0, 10_000), "test": range(1_000_000, 1_000_000 + TEST_TASKS)})


def zero_variance_share(kind: str, *, tasks: int = 200, groups: int = 3000, group_size: int = 8,
                        seed: int = 0) -> float:
    """Share of zero-variance groups when ``kind`` picks the task of each group (see the docstring)."""
    from openenv_rollouts.sampler import make_sampler, zero_variance

    r = random.Random(seed)
    rates: dict[str, float] = {}
    for i in range(tasks):
        u = r.random()
        rates[f"t{i}"] = 0.0 if u < 0.45 else 1.0 if u < 0.8 else r.uniform(0.05, 0.95)
    sampler = make_sampler(kind, list(rates), seed=seed, group_size=group_size)
    outcomes = random.Random(seed + 1)
    flat = 0
    for _ in range(groups):
        tid = sampler.sample(1)[0]
        successes = [outcomes.random() < rates[tid] for _ in range(group_size)]
        flat += zero_variance(successes)
        sampler.update(tid, successes)
    return flat / groups


async def _eval_vs_collect(*, rounds: int, k: int) -> dict[str, Any]:
    from openenv_rollouts import collect_async
    from openenv_rollouts.eval import evaluate_async
    from openenv_rollouts.server import EnvServer

    env = "bench.evaluate:TaskGrid"
    episodes = TEST_TASKS * k
    server = await EnvServer.start(env, max_sessions=CONCURRENCY * 2 + 2)
    col: list[float] = []
    ev: list[float] = []
    try:
        common: dict[str, Any] = {"base_url": server.base_url, "token": server.token, "concurrency": CONCURRENCY,
                                  "policy": "first", "max_steps": 20, "max_errors": 0}
        with tempfile.TemporaryDirectory(prefix="bench-eval-") as tmp:
            for r in range(rounds + 1):  # round 0 warms both paths up
                out = Path(tmp) / f"c{r}.jsonl"
                s = await collect_async(env, episodes=episodes, output=out, seed=1_000_000, **common)
                assert s.ok == episodes, s.to_json()
                run = await evaluate_async(env, split="test", k=k, out_dir=Path(tmp) / f"e{r}", report=False,
                                           **common)
                assert run.run.ok == episodes, run.to_json()
                if r:
                    col.append(s.steps_per_s)
                    ev.append(run.run.steps_per_s)
    finally:
        await server.stop()
    ratio = statistics.median(e / c for e, c in zip(ev, col, strict=True))
    return {"env": env, "concurrency": CONCURRENCY, "episodes": episodes, "k": k, "rounds": rounds,
            "collect_steps_per_s": round(statistics.median(col), 1),
            "eval_steps_per_s": round(statistics.median(ev), 1), "ratio": round(ratio, 3), "goal": 0.9}


def _task_api_latency(*, calls: int) -> dict[str, Any]:
    import httpx

    from openenv.interfaces import LaunchSpec
    from openenv.plugins import get_plugin_manager

    pm = get_plugin_manager()
    provider = pm.catalog.providers.load(pm.choose_provider("bench.evaluate:TaskGrid", None))()
    handle = provider.start(LaunchSpec(env="bench.evaluate:TaskGrid", max_sessions=4, token="bench-token"))
    try:
        base = handle.base_url.rstrip("/")
        with httpx.Client(headers={"Authorization": "Bearer bench-token"}, timeout=30) as http:
            listing = http.get(f"{base}/list_environments")
            listing.raise_for_status()
            prefix = f"{base}/{listing.json()[0]}"  # upstream's shape: a list of env names

            def timed(fn: Any) -> float:
                samples = []
                for _ in range(calls):
                    t0 = time.perf_counter()
                    response = fn()
                    samples.append(time.perf_counter() - t0)
                    response.raise_for_status()
                return statistics.median(samples) * 1000

            health = timed(lambda: http.get(f"{base}/health"))
            listed = timed(lambda: http.post(f"{prefix}/tasks", json={"split": "train"}))
            fetched = timed(lambda: http.post(f"{prefix}/task_by_id", json={"task_id": "train-4242"}))
            indexed = timed(lambda: http.post(f"{prefix}/task", json={"split": "train", "index": 4242}))
    finally:
        handle.stop()
    return {"tasks_in_split": 10_000, "calls": calls, "health_p50_ms": round(health, 3),
            "list_p50_ms": round(listed, 3), "fetch_p50_ms": round(fetched, 3), "index_p50_ms": round(indexed, 3),
            "list_vs_health": round(listed / health, 2), "fetch_vs_health": round(fetched / health, 2),
            "index_vs_health": round(indexed / health, 2)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.evaluate", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="One short round of each (seconds).")
    parser.add_argument("--json", action="store_true", help="Print the result as JSON.")
    args = parser.parse_args(argv)
    groups = 1500 if args.quick else 3000
    uniform, signal = (zero_variance_share(kind, groups=groups) for kind in ("uniform", "signal"))
    result: dict[str, Any] = {
        "schema": "openenv.bench.evaluate/1",
        "sampler": {"tasks": 200, "groups": groups, "group_size": 8, "uniform_zero_variance": round(uniform, 3),
                    "signal_zero_variance": round(signal, 3), "ratio": round(signal / uniform, 3), "goal": 0.5}}
    result["eval_vs_collect"] = asyncio.run(_eval_vs_collect(rounds=1 if args.quick else 3,
                                                                 k=1 if args.quick else 4))
    result["task_api"] = _task_api_latency(calls=50 if args.quick else 500)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    s = result["sampler"]
    print(f"sampler: zero-variance groups of {s['group_size']} over {s['tasks']} simulated tasks, {s['groups']} groups")
    print(f"  uniform     {s['uniform_zero_variance']:>7.1%}")
    print(f"  by signal   {s['signal_zero_variance']:>7.1%}  ratio {s['ratio']:.2f} (goal <= {s['goal']})")
    e = result["eval_vs_collect"]
    print(f"eval vs collect on {e['env']}, {e['concurrency']} sessions, {e['episodes']} episodes x {e['rounds']}")
    print(f"  collect   {e['collect_steps_per_s']:>10.1f} steps/s")
    print(f"  eval      {e['eval_steps_per_s']:>10.1f} steps/s  ratio {e['ratio']:.3f} (goal >= {e['goal']})")
    t = result["task_api"]
    print(f"Task API on a {t['tasks_in_split']}-task split, p50 of {t['calls']} calls")
    print(f"  GET /health          {t['health_p50_ms']:>8.3f} ms")
    print(f"  POST /tasks (list)   {t['list_p50_ms']:>8.3f} ms  ({t['list_vs_health']}x /health)")
    print(f"  POST /task_by_id     {t['fetch_p50_ms']:>8.3f} ms  ({t['fetch_vs_health']}x /health)")
    print(f"  POST /task (index)   {t['index_p50_ms']:>8.3f} ms  ({t['index_vs_health']}x /health)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
