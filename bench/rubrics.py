"""Cost of rubrics on the step path, and LLM-judge throughput against a local server.

``python -m bench.rubrics [--quick] [--json]``

1. **Per-call overhead** (µs): a stand-in step function (builds an observation dict) timed alone
   and followed by ``rubric.score(action, observation)``, in alternating rounds of the same run;
   the overhead is the median difference. Rubrics: a trivial one (returns a constant), the
   built-in ``exact_match`` and a two-child ``weighted_sum``. Goal: ≤ 2 µs for the trivial one.
2. **On the step path** (µs): ``SessionManager.step`` on the echo env, in-process, with no rubric
   and with the trivial rubric as the server's rubric (``openenv.sessions.scoring``), alternating
   rounds of the same run; the overhead includes attaching the components for the wire
   (the step's wire payload is built in both). Goal: ≤ 2 µs.
3. **Judge throughput** (judgements/s): ``llm_judge`` against ``openenv_rubrics.testing``'s
   chat-completions server on 127.0.0.1, which answers after a fixed delay (a stand-in for model
   latency), for several ``max_concurrency`` values, cache off. The server runs in its own process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from openenv.rubric import Rubric

__all__ = ["judge_throughput", "main", "overhead", "step_path"]


class _Trivial(Rubric):
    def evaluate(self, action: Any, observation: Any) -> float:
        return 1.0


def _step(action: str) -> dict[str, Any]:
    return {"echoed": action, "length": len(action)}


def _time_loop(fn: Callable[[], Any], n: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(n):
        fn()
    return (time.perf_counter_ns() - start) / n / 1000.0


def overhead(rubric: Rubric, *, calls: int, rounds: int) -> dict[str, float]:
    """Median µs per step without and with ``rubric``, and the difference (same run, alternating)."""
    action = "hello"

    def bare() -> Any:
        return _step(action)

    def scored() -> Any:
        obs = _step(action)
        return rubric.score(action, obs)

    _time_loop(bare, calls // 10)
    _time_loop(scored, calls // 10)  # warm-up
    base, with_rubric = [], []
    for _ in range(rounds):
        base.append(_time_loop(bare, calls))
        with_rubric.append(_time_loop(scored, calls))
    diffs = [w - b for b, w in zip(base, with_rubric, strict=True)]
    return {"step_us": statistics.median(base), "step_with_rubric_us": statistics.median(with_rubric),
            "overhead_us": statistics.median(diffs)}


async def _step_path_async(calls: int, rounds: int) -> dict[str, float]:
    from openenv.sessions import SessionManager
    from openenv_env_echo.env import EchoEnv

    class _Bare(EchoEnv):  # the echo env without its declared rubric
        rubric = None

    bare = SessionManager(_Bare, max_sessions=1)
    scored = SessionManager(_Bare, max_sessions=1, rubric=_Trivial(name="trivial"))
    sessions = []
    for manager in (bare, scored):
        session = await manager.open()
        await manager.reset(session)
        sessions.append(session)
    action = {"message": "hello"}

    async def loop(manager: Any, session: Any, n: int) -> float:
        step = manager.step_outcome
        start = time.perf_counter_ns()
        for _ in range(n):
            (await step(session, action)).payload(True)  # as for a client that asked for the components
        return (time.perf_counter_ns() - start) / n / 1000.0

    await loop(bare, sessions[0], calls // 10)
    await loop(scored, sessions[1], calls // 10)
    base, with_rubric = [], []
    for _ in range(rounds):
        base.append(await loop(bare, sessions[0], calls))
        with_rubric.append(await loop(scored, sessions[1], calls))
    for manager in (bare, scored):
        await manager.shutdown()
    diffs = [w - b for b, w in zip(base, with_rubric, strict=True)]
    return {"step_us": statistics.median(base), "step_with_rubric_us": statistics.median(with_rubric),
            "overhead_us": statistics.median(diffs)}


def step_path(*, calls: int, rounds: int) -> dict[str, float]:
    """Median µs per ``SessionManager.step`` (+ wire envelope) without and with a trivial server rubric."""
    return asyncio.run(_step_path_async(calls, rounds))


async def _judge_run(url: str, concurrency: int, requests: int) -> float:
    from openenv_rubrics.judge import LLMJudge

    judge = LLMJudge(base_url=url, model="bench", max_concurrency=concurrency, cache_size=0, max_retries=0)
    await judge.ascore("warm-up", None)
    start = time.perf_counter()
    results = await asyncio.gather(*(judge.ascore(f"answer {i}", None) for i in range(requests)))
    elapsed = time.perf_counter() - start
    await judge.aclose()
    assert all(r.score == 1.0 for r in results)
    return requests / elapsed


def judge_throughput(*, delay: float, concurrencies: list[int], requests: int) -> list[dict[str, float]]:
    """Judgements per second for each concurrency limit against a server answering after ``delay``.

    The server (``python -m openenv_rubrics.testing``) runs in its own process, so its threads do
    not share this process's interpreter lock with the judge's event loop.
    """
    import subprocess
    import sys

    server = subprocess.Popen([sys.executable, "-m", "openenv_rubrics.testing", "--delay", str(delay)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    rows = []
    try:
        assert server.stdout is not None
        url = server.stdout.readline().strip()
        if not url.startswith("http://127.0.0.1:"):
            raise RuntimeError(f"the local chat server did not start (printed {url!r})")
        for c in concurrencies:
            rate = asyncio.run(_judge_run(url, c, requests))
            rows.append({"max_concurrency": c, "judgements_per_s": rate, "ideal_per_s": c / delay})
    finally:
        assert server.stdin is not None
        server.stdin.close()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.rubrics", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="Fewer calls and requests (~10 s).")
    parser.add_argument("--json", action="store_true", help="Print the results as JSON.")
    args = parser.parse_args(argv)
    calls, rounds = (20_000, 5) if args.quick else (200_000, 9)
    requests = 64 if args.quick else 400

    from openenv_rubrics.builtin import ExactMatch
    from openenv_rubrics.compose import WeightedSum

    rubrics: dict[str, Rubric] = {
        "trivial": _Trivial(),
        "exact_match": ExactMatch(expected="hello"),
        "weighted_sum(2)": WeightedSum([ExactMatch(expected="hello"), _Trivial()], weights=[0.5, 0.5]),
    }
    doc: dict[str, Any] = {"overhead": {name: overhead(r, calls=calls, rounds=rounds) for name, r in rubrics.items()},
                           "step_path": step_path(calls=calls // 2, rounds=rounds),
                           "judge": judge_throughput(delay=0.02, concurrencies=[1, 4, 16], requests=requests),
                           "goal_trivial_overhead_us": 2.0}
    doc["goal_met"] = (doc["overhead"]["trivial"]["overhead_us"] <= 2.0
                       and doc["step_path"]["overhead_us"] <= 2.0)
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    print("rubric overhead per step (median of rounds, same run)")
    print(f"  {'rubric':<18}{'step µs':>10}{'+rubric µs':>12}{'overhead µs':>13}")
    for name, row in doc["overhead"].items():
        print(f"  {name:<18}{row['step_us']:>10.3f}{row['step_with_rubric_us']:>12.3f}{row['overhead_us']:>13.3f}")
    row = doc["step_path"]
    print(f"  {'step path (echo)':<18}{row['step_us']:>10.3f}{row['step_with_rubric_us']:>12.3f}"
          f"{row['overhead_us']:>13.3f}   SessionManager.step + envelope, trivial server rubric")
    print(f"  goal: trivial overhead <= 2 µs: {'met' if doc['goal_met'] else 'NOT met'}")
    print("llm_judge throughput against 127.0.0.1 (server answers after 20 ms; cache off)")
    for row in doc["judge"]:
        print(f"  max_concurrency={row['max_concurrency']:<3} {row['judgements_per_s']:8.1f} judgements/s "
              f"(ideal {row['ideal_per_s']:.0f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
