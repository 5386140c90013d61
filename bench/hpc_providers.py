"""HPC providers benchmark: start-to-ready p50 of ``bwrap`` and ``slurm`` against ``local``, and
steps/s through a server of each against a ``local`` one, in the same run.

    python -m bench.hpc_providers --quick    # ~30-40 s: 3 starts each, 5 rounds of 1 s step windows
    python -m bench.hpc_providers            # 7 starts each, 15 rounds of 2 s step windows

"Start to ready" is ``Provider().start(spec)`` wall time for the echo env: for ``bwrap`` the
sandbox set-up plus the server's start; for ``slurm`` the submission, scheduling on a one-node
cluster (``.ci/slurm-setup.sh``), the job's start and the readiness probe. Steps/s is one client
session per provider stepping echo back to back over ``/ws``, the providers' windows interleaved
round by round (the median is reported), so load on the machine falls on all of them alike;
the goal is >= 0.9x local for both (``bwrap`` has no relay: clients reach the server on a socket
bound on the host). A provider whose engine
is absent (no bwrap, no Slurm controller) gets a row saying so instead of numbers. Results are
printed, and written as JSON with ``--out PATH``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

__all__ = ["main", "step_rate"]

PROVIDERS = ("local", "bwrap", "slurm")


def _provider(name: str) -> Any:
    from openenv.plugins import get_plugin_manager

    return get_plugin_manager().catalog.providers.get(name).load()()


def _available(name: str) -> str | None:
    """None when ``name`` can start servers here, else why not (one line)."""
    from openenv.interfaces import EngineUnavailable

    try:
        if name == "bwrap":
            from openenv_provider_bwrap.provider import preflight

            preflight()
        elif name == "slurm":
            from openenv_provider_slurm.provider import slurm_available

            slurm_available()
    except (EngineUnavailable, ImportError) as exc:
        return str(exc)
    return None


def _start_times(name: str, runs: int) -> list[float]:
    from openenv.interfaces import LaunchSpec

    provider = _provider(name)
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        handle = provider.start(LaunchSpec(env="echo", startup_timeout_s=120.0))
        times.append(time.perf_counter() - started)
        handle.stop()
    return times


def _steps_per_s(names: list[str], window_s: float, rounds: int) -> dict[str, float]:
    """Steps/s of one session per provider, the providers' windows interleaved round by round.

    Every provider's server is up at once and each round steps each of them for ``window_s`` in
    turn, so a burst of load on this machine falls on all of them alike instead of on whichever
    provider was measured last; the result is the median over rounds.
    """
    from contextlib import ExitStack

    from openenv.client import SyncEnvClient
    from openenv.interfaces import LaunchSpec

    spec = LaunchSpec(env="echo", startup_timeout_s=120.0)
    rates: dict[str, list[float]] = {name: [] for name in names}
    with ExitStack() as stack:
        clients = {name: stack.enter_context(SyncEnvClient.from_provider("echo", provider=name, launch=spec))
                   for name in names}
        for client in clients.values():
            client.reset()
            for _ in range(50):  # warm-up
                client.step({"message": "warm"})
        for _ in range(rounds):
            for name, client in clients.items():
                rates[name].append(step_rate(client, window_s))
    return {name: statistics.median(r) for name, r in rates.items()}


def step_rate(client: Any, window_s: float) -> float:
    """Echo steps per second of one session stepping back to back for ``window_s`` (also used by
    ``bench.ray_provider``)."""
    steps = 0
    started = time.perf_counter()
    deadline = started + window_s
    while time.perf_counter() < deadline:
        client.step({"message": "bench"})
        steps += 1
    return steps / (time.perf_counter() - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.hpc_providers", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 starts each, 5 interleaved 1 s step windows")
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args(argv)
    runs, window, rounds = (3, 1.0, 5) if args.quick else (7, 2.0, 15)

    results: dict[str, Any] = {"window_s": window, "rounds": rounds, "runs": runs, "providers": {}}
    for name in PROVIDERS:
        missing = _available(name)
        if missing:
            results["providers"][name] = {"skipped": missing}
            continue
        starts = _start_times(name, runs)
        results["providers"][name] = {"start_to_ready_s": {"runs": starts, "p50": statistics.median(starts)}}
    up = [name for name, row in results["providers"].items() if "skipped" not in row]
    for name, rate in _steps_per_s(up, window, rounds).items():
        results["providers"][name]["steps_per_s"] = rate
    local = results["providers"]["local"]
    print(f"HPC providers benchmark ({'quick' if args.quick else 'full'}; echo env, 1 session, {runs} starts each)")
    for name, row in results["providers"].items():
        if "skipped" in row:
            print(f"  {name:<6} skipped: {row['skipped']}")
            continue
        ratio = row["steps_per_s"] / local["steps_per_s"]
        row["steps_over_local"] = ratio
        row["start_over_local"] = row["start_to_ready_s"]["p50"] / local["start_to_ready_s"]["p50"]
        print(f"  {name:<6} start to ready p50 {row['start_to_ready_s']['p50']:.2f} s "
              f"({row['start_over_local']:.1f}x local)   steps/s {row['steps_per_s']:,.0f} "
              f"({ratio:.2f}x local, goal >= 0.9)")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
