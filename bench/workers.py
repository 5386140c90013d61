"""Steps/s of ``openenv serve ENV --workers 2`` against ``--workers 1``, in alternating rounds.

``python -m bench.workers [--quick] [--envs coding,echo] [--sessions 8] [--seconds 10] [--rounds 3]``
starts, for each env, one server per worker count (1: the plain single process; 2: the front and
two workers, docs/workers.md), then alternates rounds: a load-generator process (``--loadgen``, a
separate interpreter, as a trainer's client would be) opens ``--sessions`` WebSocket sessions
through the one port and steps them in closed loops for ``--seconds``; steps/s are counted in the
load generator. It prints each env's steps/s at 1 and 2 workers and the ratio (issue 31's goal for
the sandboxed ``coding`` env: >= 1.7 on 2 cores with the load generator on another core).

The ``coding`` step runs a small program in the sandbox (a fresh forked, unprivileged process);
an episode ends after 10 steps and the session resets. The ``echo`` step is pure protocol: there
the load generator and the front's splice cost as much as the env, so expect far less than 2x.
Goals are reported, never asserted; the exit status is 0 whenever something was measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["ACTIONS", "loadgen", "main", "measure"]

#: One step's action per env (what the load generator sends).
ACTIONS: dict[str, dict[str, Any]] = {
    "echo": {"message": "hello"},
    "coding": {"code": "print(sum(i * i for i in range(2000)))"},
}


async def _session(url: str, action: dict[str, Any], deadline: float, counts: list[int]) -> None:
    from openenv.client import GenericEnvClient

    async with GenericEnvClient(url, transport="ws") as client:
        await client.reset()
        while time.monotonic() < deadline:
            result = await client.step(action)
            counts[0] += 1
            if result.done:  # coding: 10 steps per episode
                await client.reset()


async def loadgen(url: str, env: str, sessions: int, seconds: float) -> dict[str, Any]:
    """``sessions`` closed loops of steps for ``seconds`` (after a short warm-up)."""
    warm = [0]
    await asyncio.gather(*(_session(url, ACTIONS[env], time.monotonic() + 0.5, warm) for _ in range(sessions)))
    counts = [0]
    started = time.monotonic()
    await asyncio.gather(*(_session(url, ACTIONS[env], started + seconds, counts) for _ in range(sessions)))
    elapsed = time.monotonic() - started
    return {"steps": counts[0], "seconds": elapsed, "steps_per_s": counts[0] / elapsed}


def _serve(env: str, workers: int, sessions: int, tmp: Path) -> tuple[subprocess.Popen[bytes], str, list[int]]:
    ready = tmp / f"{env}-{workers}.json"
    proc = subprocess.Popen([sys.executable, "-m", "openenv", "serve", env, "--port", "0", "--workers", str(workers),
                             "--max-sessions", str(max(sessions, workers) * 2), "--ready-file", str(ready),
                             "--log-level", "warning"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"openenv serve {env} --workers {workers} did not start")
        time.sleep(0.1)
    info = json.loads(ready.read_text())
    return proc, f"http://127.0.0.1:{info['port']}", [info["pid"], *info.get("workers", [])]


def _cpu(pids: list[int]) -> list[float]:
    """CPU seconds (user + system) of each process so far."""
    from bench.procfs import cpu_times

    return [sum(cpu_times(pid) or (0.0, 0.0)) for pid in pids]


def _round(url: str, env: str, sessions: int, seconds: float) -> float:
    out = subprocess.run([sys.executable, "-m", "bench.workers", "--loadgen", url, "--envs", env,
                          "--sessions", str(sessions), "--seconds", str(seconds)],
                         capture_output=True, text=True, timeout=seconds * 4 + 120, check=True)
    return float(json.loads(out.stdout.strip().splitlines()[-1])["steps_per_s"])


def measure(env: str, *, sessions: int, seconds: float, rounds: int) -> dict[str, Any]:
    """Median steps/s at 1 and 2 workers, measured in alternating rounds."""
    with tempfile.TemporaryDirectory(prefix="bench-workers-") as tmp:
        servers = {w: _serve(env, w, sessions, Path(tmp)) for w in (1, 2)}
        try:
            rates: dict[int, list[float]] = {1: [], 2: []}
            front_us: list[float] = []  # the front's CPU per step at 2 workers
            for _ in range(rounds):  # alternating: a change in the machine's load falls on both
                for w, (_, url, pids) in servers.items():
                    before = _cpu(pids)
                    started = time.monotonic()
                    rate = _round(url, env, sessions, seconds)
                    elapsed = time.monotonic() - started  # the load generator's warm-up and start included
                    rates[w].append(rate)
                    if w == 2:
                        front_us.append((_cpu(pids)[0] - before[0]) / (rate * elapsed) * 1e6)
        finally:
            for proc, _, _ in servers.values():
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    one, two = statistics.median(rates[1]), statistics.median(rates[2])
    return {"env": env, "sessions": sessions, "seconds": seconds, "rounds": rounds,
            "workers_1_steps_per_s": one, "workers_2_steps_per_s": two, "ratio": two / one,
            "front_cpu_us_per_step": statistics.median(front_us)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.workers", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="3 s windows, one round (CI)")
    ap.add_argument("--envs", default="coding,echo")
    ap.add_argument("--sessions", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--loadgen", metavar="URL", help=argparse.SUPPRESS)  # the load-generator process
    args = ap.parse_args(argv)
    if args.loadgen:
        print(json.dumps(asyncio.run(loadgen(args.loadgen, args.envs, args.sessions, args.seconds))))
        return 0
    seconds, rounds = (3.0, 1) if args.quick else (args.seconds, args.rounds)
    measured = 0
    print(f"serve --workers 2 vs 1 ({os.cpu_count()} cores here), {args.sessions} WebSocket sessions "
          "from one load-generator process:")
    for env in args.envs.split(","):
        try:
            row = measure(env, sessions=args.sessions, seconds=seconds, rounds=rounds)
        except (RuntimeError, subprocess.SubprocessError) as exc:
            print(f"  {env}: not measured: {exc}")
            continue
        measured += 1
        goal = " (goal >= 1.7)" if env == "coding" else ""
        print(f"  {env}: 1 worker {row['workers_1_steps_per_s']:.0f} steps/s, 2 workers "
              f"{row['workers_2_steps_per_s']:.0f} steps/s, ratio {row['ratio']:.2f}{goal}; the front's CPU "
              f"~{row['front_cpu_us_per_step']:.0f} us/step")
    return 0 if measured else 1


if __name__ == "__main__":
    raise SystemExit(main())
