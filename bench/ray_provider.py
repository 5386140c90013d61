"""Ray provider benchmark: actor launch-to-ready, and steps/s through a Ray-placed server against a
local-provider server, in the same run, on one throw-away Ray head on 127.0.0.1.

    python -m bench.ray_provider --quick     # ~1-2 min: 3 launches, 2 s step windows
    python -m bench.ray_provider             # 5 launches, 10 s step windows

"Launch to ready" is ``RayProvider().start(spec)`` wall time on a running cluster: actor creation,
worker start-up, app build, bind, and the kernel's readiness probe (``/health``, ``/capabilities``,
one ``/ws`` round-trip). Steps/s is one client session stepping the echo env back to back over
``/ws`` for the window. Results are printed, and written as JSON with ``--out PATH``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from typing import Any

from bench.hpc_providers import step_rate

__all__ = ["main"]


def _launch_times(runs: int) -> list[float]:
    from openenv.interfaces import LaunchSpec
    from openenv_provider_ray.provider import RayProvider

    provider = RayProvider()
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        handle = provider.start(LaunchSpec(env="echo", options={"cpus": 0.5}, startup_timeout_s=180.0))
        times.append(time.perf_counter() - started)
        handle.stop()
    return times


def _steps_per_s(provider_name: str, window_s: float) -> float:
    from openenv.client import SyncEnvClient
    from openenv.interfaces import LaunchSpec

    options: dict[str, Any] = {"cpus": 0.5} if provider_name == "ray" else {}
    spec = LaunchSpec(env="echo", options=options, startup_timeout_s=180.0)
    with SyncEnvClient.from_provider("echo", provider=provider_name, launch=spec) as client:
        client.reset()
        for _ in range(50):  # warm-up
            client.step({"message": "warm"})
        return step_rate(client, window_s)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ray_provider", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 launches, 2 s step windows")
    parser.add_argument("--out", help="write the results as JSON here")
    args = parser.parse_args(argv)
    runs, window = (3, 2.0) if args.quick else (5, 10.0)

    from openenv_provider_ray.testing import LocalRayHead, listening_wide

    with LocalRayHead(num_cpus=2) as head:
        os.environ.update(head.environment())
        import ray

        ray.init(address=head.address, namespace="openenv", log_to_driver=False)
        try:
            wide = listening_wide(head.pids())
            launches = _launch_times(runs)
            ray_rate = _steps_per_s("ray", window)
            local_rate = _steps_per_s("local", window)
        finally:
            ray.shutdown()
    results = {
        "launch_to_ready_s": {"runs": launches, "p50": statistics.median(launches),
                              "max": max(launches)},
        "steps_per_s": {"ray": ray_rate, "local": local_rate, "ray_over_local": ray_rate / local_rate},
        "window_s": window, "ray_listening_wide": wide,
    }
    print(f"Ray provider benchmark ({'quick' if args.quick else 'full'}; Ray head on 127.0.0.1, 2 CPUs)")
    print(f"  actor launch to ready  p50 {results['launch_to_ready_s']['p50']:.2f} s  "
          f"max {max(launches):.2f} s  over {runs} launches")
    print(f"  steps/s, 1 session     ray {ray_rate:,.0f}   local {local_rate:,.0f}   "
          f"ray/local {ray_rate / local_rate:.2f}")
    print(f"  Ray sockets not on loopback: {len(wide)}" + "".join(f"\n    {line}" for line in wide))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
