"""Cost of one blocking env call's hop to its session's thread and back, in-process.

``python -m bench.envhop [--calls 20000] [--rounds 3]`` times, on a uvloop event loop, ``--calls``
sequential calls of a trivial function through:

* ``ours`` — ``openenv.sessions.runner.Runner("thread")``: the session's ``EnvThread``, with a
  deadline, exactly as a blocking env's ``step`` is run;
* ``asyncio`` — the standard-library hop with the same guarantees: ``asyncio.wait_for`` on
  ``loop.run_in_executor`` of a one-thread ``ThreadPoolExecutor`` (a ``concurrent.futures.Future``
  wrapped into an asyncio one: what the runner did before);
* ``inline`` — the call made on the loop itself (the floor: no hop).

It prints process CPU and wall time per call and the per-call p50/p99, and the ratio of ours to
the asyncio reference measured in the same run (rounds alternate between variants, so a change in
the machine's load falls on all of them). Every blocking session's step pays the hop on the one
event loop serving all sessions, so it is both a step's latency and what each other session's
step costs a bystander.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from openenv.sessions.runner import EnvThread, Runner

__all__ = ["main", "measure"]

#: The deadline given to every call (never reached: the calls return at once).
_DEADLINE_S = 300.0


def _work(x: int) -> int:
    return x + 1


async def _ours(n: int) -> tuple[float, float, list[float]]:
    runner = Runner("thread", EnvThread("openenv-bench-hop"), True)
    try:
        return await _time(n, lambda i: runner.call(_work, i, timeout=_DEADLINE_S))
    finally:
        runner.shutdown()


async def _asyncio(n: int) -> tuple[float, float, list[float]]:
    loop = asyncio.get_running_loop()
    with ThreadPoolExecutor(1) as pool:
        return await _time(n, lambda i: asyncio.wait_for(loop.run_in_executor(pool, _work, i), _DEADLINE_S))


async def _inline(n: int) -> tuple[float, float, list[float]]:
    async def call(i: int) -> int:
        return _work(i)

    return await _time(n, call)


async def _time(n: int, call: Callable[[int], Awaitable[Any]]) -> tuple[float, float, list[float]]:
    for i in range(min(n, 500)):  # warm-up: the thread is started, caches are hot
        await call(i)
    clock = time.perf_counter
    lat = []
    wall, cpu = clock(), time.process_time()
    for i in range(n):
        t = clock()
        await call(i)
        lat.append(clock() - t)
    return clock() - wall, time.process_time() - cpu, lat


Timing = tuple[float, float, list[float]]
VARIANTS: dict[str, Callable[[int], Coroutine[Any, Any, Timing]]] = {
    "ours": _ours, "asyncio": _asyncio, "inline": _inline}


def measure(calls: int, rounds: int) -> dict[str, dict[str, float]]:
    """Per variant: median over rounds of CPU µs and wall µs per call; p50/p99 µs of all calls."""
    try:
        import uvloop

        new_loop: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    except ImportError:  # the server falls back to asyncio's loop too
        new_loop = asyncio.new_event_loop
    cpu: dict[str, list[float]] = {k: [] for k in VARIANTS}
    wall: dict[str, list[float]] = {k: [] for k in VARIANTS}
    lat: dict[str, list[float]] = {k: [] for k in VARIANTS}
    for _ in range(rounds):
        for name, variant in VARIANTS.items():
            with asyncio.Runner(loop_factory=new_loop) as runner:
                timing: Timing = runner.run(variant(calls))
            w, c, xs = timing
            wall[name].append(w / calls * 1e6)
            cpu[name].append(c / calls * 1e6)
            lat[name] += xs
    out = {}
    for name in VARIANTS:
        xs = sorted(lat[name])
        out[name] = {"cpu_us": statistics.median(cpu[name]), "wall_us": statistics.median(wall[name]),
                     "p50_us": xs[len(xs) // 2] * 1e6, "p99_us": xs[int(len(xs) * 0.99)] * 1e6}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.envhop", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer calls (CI)")
    ap.add_argument("--calls", type=int, default=None)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    calls = args.calls or (5000 if args.quick else 20000)
    result = measure(calls, args.rounds)
    print(f"{'hop of one blocking env call':<30}{'CPU us':>9}{'wall us':>9}{'p50 us':>9}{'p99 us':>9}")
    for name, row in result.items():
        print(f"{name:<30}{row['cpu_us']:>9.1f}{row['wall_us']:>9.1f}{row['p50_us']:>9.1f}{row['p99_us']:>9.1f}")
    ours, ref = result["ours"], result["asyncio"]
    print(f"ours / asyncio's run_in_executor + wait_for: CPU {ours['cpu_us'] / ref['cpu_us']:.2f}x, "
          f"p50 {ours['p50_us'] / ref['p50_us']:.2f}x ({calls} calls x {args.rounds} rounds)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
