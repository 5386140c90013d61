"""Collect throughput against raw stepping of the same env, and against upstream 0.10's collect.

``python -m bench.collect [--quick] [--json] [--upstream-python PY]``

**Collect vs raw stepping** (goal ≥ 0.8). One grid_world server (local provider) holds 64+
sessions. Two loads alternate on it, each ``rounds`` times: **raw** — 64 concurrent clients reset
and step episodes with the first legal move and record nothing; **collect** —
``openenv_rollouts.collect_async`` with the ``first`` policy and 64 concurrent sessions, writing
every episode (steps, observations, timings) to a JSONL file, each line written before the
episode counts and fsynced by its writer thread. Both play the same episodes (same step limit).
The number is steps/s; the ratio is collect / raw, taken per round (a raw round and the collect
round after it share the machine's load) and reported as the median over the rounds.

**Collect vs upstream's collect** (goal ≥ 3×). Upstream's ``openenv collect`` is wired to two env
families, OpenSpiel and reasoning_gym, whose client packages are not on the package index, and
drives them through its ``CollectRunner`` (one episode at a time: no concurrency option; each
episode a new connection, ``reset`` then ``state``, and ``step`` then ``state`` for every tool
call; one JSON line appended per episode). ``bench/upstream_collect.py`` runs that command itself
in upstream's venv, with the OpenSpiel client and session factory it imports supplied as the thin
equivalents its docstring asks for (see that file), against **our OpenSpiel env** serving
tic-tac-toe — the env family upstream's collect is built for. Upstream plays its scripted teacher
(the first legal action); ours plays ``--policy first`` on the same server, once with one session
(the same shape as upstream's runner) and once with 64. Each tool's whole collect call is timed
from outside (wall clock, server already up); the numbers are steps (agent moves) per second and
the ratios ours / upstream, per round, median over the rounds. Without upstream's venv
(``OPENENV_UPSTREAM_PYTHON`` or ``.nox/upstream-openenv-0.10``) these rows are skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["collect_steps_per_s", "main", "raw_steps_per_s", "upstream_steps_per_s"]

ENV = "grid_world"
CONCURRENCY = 64
ROOT = Path(__file__).resolve().parent.parent
#: The env and task of the comparison with upstream's collect (its ``openspiel:tic_tac_toe``).
UPSTREAM_ENV, UPSTREAM_TASK = "openspiel", {"game": "tic_tac_toe"}


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


async def _ours_on_upstream_env(base_url: str, token: str, *, episodes: int, concurrency: int, out: Path) -> float:
    """Our collect on the comparison's env, timed like upstream's: the whole call, from outside."""
    from openenv_rollouts import collect_async

    _remove(out)
    started = time.perf_counter()
    summary = await collect_async(UPSTREAM_ENV, base_url=base_url, token=token, episodes=episodes,
                                  concurrency=concurrency, output=out, policy="first", seed=0,
                                  tasks=[UPSTREAM_TASK], max_errors=0)
    elapsed = time.perf_counter() - started
    assert summary.ok == episodes, summary.to_json()
    return summary.steps / elapsed


def upstream_steps_per_s(python: Path, base_url: str, token: str, *, episodes: int) -> float:
    """Upstream's ``openenv collect`` (``bench/upstream_collect.py`` in its venv) on the server."""
    with tempfile.TemporaryDirectory(prefix="bench-upstream-") as tmp:
        result = Path(tmp) / "result.json"
        done = subprocess.run(
            [str(python), str(ROOT / "bench" / "upstream_collect.py"), "--base-url", base_url, "--episodes",
             str(episodes), "--result-file", str(result)],
            env={**os.environ, "OPENENV_TOKEN": token}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True, timeout=600, cwd=tmp)
        if done.returncode != 0 or not result.exists():
            raise RuntimeError(f"upstream's collect failed (exit {done.returncode}): {done.stderr[-2000:]}")
        doc = json.loads(result.read_text())
    if doc["episodes"] != episodes:
        raise RuntimeError(f"upstream's collect wrote {doc['episodes']} of {episodes} episodes")
    return float(doc["steps"]) / float(doc["elapsed_s"])


def _upstream_python(given: str | None) -> Path | None:
    for candidate in (given, os.environ.get("OPENENV_UPSTREAM_PYTHON"),
                      str(ROOT / ".nox" / "upstream-openenv-0.10" / "bin" / "python")):
        if candidate and Path(candidate).exists():
            return Path(candidate)
    return None


def _ratio(numerators: list[float], denominators: list[float]) -> float:
    """Median of the per-round ratios (each pair measured back to back, under the same load)."""
    return statistics.median(n / d for n, d in zip(numerators, denominators, strict=True))


async def _run_raw_vs_collect(*, episodes: int, rounds: int, max_steps: int) -> dict[str, Any]:
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
    return {"env": ENV, "concurrency": CONCURRENCY, "episodes": episodes, "rounds": rounds, "max_steps": max_steps,
            "raw_steps_per_s": round(statistics.median(raw), 1),
            "collect_steps_per_s": round(statistics.median(col), 1), "ratio": round(_ratio(col, raw), 3),
            "goal": 0.8, "raw_rounds": [round(x, 1) for x in raw], "collect_rounds": [round(x, 1) for x in col]}


async def _run_vs_upstream(python: Path, *, episodes: int, rounds: int) -> dict[str, Any]:
    from openenv_rollouts.server import EnvServer

    server = await EnvServer.start(UPSTREAM_ENV, max_sessions=CONCURRENCY * 2 + 2)
    rows: dict[str, list[float]] = {"upstream": [], "ours_1": [], f"ours_{CONCURRENCY}": []}
    try:
        token = str(server.token)
        with tempfile.TemporaryDirectory(prefix="bench-collect-up-") as tmp:
            out = Path(tmp) / "r.jsonl"
            await _ours_on_upstream_env(server.base_url, token, episodes=8, concurrency=1, out=out)  # warm-up
            for _ in range(rounds):
                rows["upstream"].append(await asyncio.to_thread(
                    upstream_steps_per_s, python, server.base_url, token, episodes=episodes))
                for c in (1, CONCURRENCY):
                    rows[f"ours_{c}"].append(await _ours_on_upstream_env(
                        server.base_url, token, episodes=episodes, concurrency=c, out=out))
    finally:
        await server.stop()
    up = rows["upstream"]
    return {"env": f"{UPSTREAM_ENV} ({UPSTREAM_TASK['game']})", "episodes": episodes, "rounds": rounds,
            "upstream_steps_per_s": round(statistics.median(up), 1),
            "ours_1_steps_per_s": round(statistics.median(rows["ours_1"]), 1),
            f"ours_{CONCURRENCY}_steps_per_s": round(statistics.median(rows[f"ours_{CONCURRENCY}"]), 1),
            "ratio_1": round(_ratio(rows["ours_1"], up), 3),
            f"ratio_{CONCURRENCY}": round(_ratio(rows[f"ours_{CONCURRENCY}"], up), 3), "goal": 3.0,
            "rounds_steps_per_s": {k: [round(x, 1) for x in v] for k, v in rows.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.collect", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="Fewer episodes and rounds (~45 s).")
    parser.add_argument("--json", action="store_true", help="Print the result as JSON.")
    parser.add_argument("--upstream-python", default=None,
                        help="Python of a venv with openenv==0.10.0 (default: $OPENENV_UPSTREAM_PYTHON, then "
                             ".nox/upstream-openenv-0.10).")
    args = parser.parse_args(argv)
    episodes, rounds = (512, 3) if args.quick else (1024, 5)
    result: dict[str, Any] = {"schema": "openenv.bench.collect/2",
                              "vs_raw": asyncio.run(_run_raw_vs_collect(episodes=episodes, rounds=rounds,
                                                                        max_steps=20))}
    python = _upstream_python(args.upstream_python)
    if python is None:
        result["vs_upstream"] = {"skipped": "no venv with openenv==0.10.0: set OPENENV_UPSTREAM_PYTHON or run "
                                            "`nox -s bench`, which builds .nox/upstream-openenv-0.10"}
    else:
        result["vs_upstream"] = asyncio.run(_run_vs_upstream(python, episodes=300 if args.quick else 600,
                                                             rounds=2 if args.quick else 3))
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    raw = result["vs_raw"]
    print(f"collect on {ENV}, {CONCURRENCY} sessions, {raw['episodes']} episodes x {raw['rounds']} rounds")
    print(f"  raw stepping      {raw['raw_steps_per_s']:>10.1f} steps/s")
    print(f"  openenv collect   {raw['collect_steps_per_s']:>10.1f} steps/s")
    print(f"  ratio             {raw['ratio']:>10.3f}  (median of per-round ratios; goal >= {raw['goal']})")
    up = result["vs_upstream"]
    if "skipped" in up:
        print(f"upstream 0.10's collect: skipped ({up['skipped']})")
        return 0
    print(f"collect vs upstream 0.10's `openenv collect` on our {up['env']}, {up['episodes']} episodes x "
          f"{up['rounds']} rounds")
    print(f"  upstream collect  {up['upstream_steps_per_s']:>10.1f} steps/s  (sequential: it has no concurrency)")
    print(f"  ours, 1 session   {up['ours_1_steps_per_s']:>10.1f} steps/s  ratio {up['ratio_1']:.2f}x")
    print(f"  ours, {CONCURRENCY} sessions {up[f'ours_{CONCURRENCY}_steps_per_s']:>10.1f} steps/s  ratio "
          f"{up[f'ratio_{CONCURRENCY}']:.2f}x  (goal >= {up['goal']}x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
