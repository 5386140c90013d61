"""``python -m bench.sandbox [--quick]``: the sandbox against a fresh interpreter, in one run.

Measures, interleaved sample by sample so that both see the same machine load:

* latency (p50/p99) of executing ``print(1)`` in ``openenv_sandbox`` (warm zygote: fork, limits,
  new network namespace, uid drop, fresh directory) and of a fresh ``python -c 'print(1)'``
  subprocess of the same interpreter (no isolation at all);
* throughput with 16 concurrent sessions (16 threads, each running ``print(1)`` back to back);
* the fallback runner (a fresh isolated interpreter per execution) for reference;
* grading in a separate box (``grade_copy``: copy a small git tree, run a check in a fresh
  execution as the grader uid with a private ``/tmp``, read the verdict) against running the same
  check in the tree itself (``run_python(workdir=tree)``, what the shell env did before): the
  price of the shell env's per-step grading, as a ratio of the same run.

Prints a table and writes JSON (``--out``). Goal (issue 15): sandbox p50 ≤ 0.5× the fresh
interpreter's p50. Goals are reported, never asserted; the exit status is 0 whenever it ran.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from openenv_sandbox import Limits, Sandbox, grade_copy

__all__ = ["main", "measure"]

GOAL_RATIO = 0.5


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _summary(samples: list[float]) -> dict[str, float]:
    return {"n": len(samples), "p50_ms": round(_pct(samples, 0.50) * 1e3, 3),
            "p99_ms": round(_pct(samples, 0.99) * 1e3, 3), "mean_ms": round(statistics.fmean(samples) * 1e3, 3)}


def _timed(fn: Any) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _throughput(run_one: Any, sessions: int, seconds: float) -> dict[str, float]:
    counts = [0] * sessions
    failures = [0] * sessions
    stop = time.monotonic() + seconds

    def worker(i: int) -> None:
        while time.monotonic() < stop:
            if run_one():
                counts[i] += 1
            else:
                failures[i] += 1

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(sessions)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    return {"sessions": sessions, "executions": sum(counts), "failures": sum(failures),
            "per_s": round(sum(counts) / elapsed, 1)}


def _git_tree(tree: Path) -> None:
    """A tree like a shell task's: a few files committed with git (its hooks samples included)."""
    (tree / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (tree / "test_calc.py").write_text("from calc import add\nassert add(2, 3) == 5\n")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tree), "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-qm", "t"]):
        subprocess.run(["git", *args], cwd=tree, env=env, check=True, capture_output=True, timeout=30)


def measure(samples: int, seconds: float, sessions: int = 16) -> dict[str, Any]:
    limits = Limits(wall_time_s=30.0)
    with Sandbox(limits, slots=max(sessions, 16)) as box, \
            Sandbox(limits, slots=4, pool=False, uid_base=61500) as fallback:
        python = box.python

        def sandboxed() -> bool:
            return box.run_python("print(1)").stdout == "1\n"

        def fresh() -> bool:
            out = subprocess.run([python, "-c", "print(1)"], capture_output=True, check=False)
            return out.stdout == b"1\n"

        def fallback_run() -> bool:
            return fallback.run_python("print(1)").stdout == "1\n"

        tree = box.make_tree()
        _git_tree(tree)
        check = "assert open('calc.py').read().startswith('def add')\n"

        def graded() -> bool:
            return grade_copy(box, check, tree=tree).passed

        def in_tree() -> bool:
            return box.run_python(check, workdir=tree).exit_code == 0

        for fn in (sandboxed, fresh, fallback_run, graded, in_tree):  # warm-up (starts the zygote)
            for _ in range(3):
                fn()
        lat: dict[str, list[float]] = {"sandbox": [], "fresh_python": [], "sandbox_fallback": [],
                                       "grade_copy": [], "check_in_tree": []}
        for i in range(samples):
            order = [("sandbox", sandboxed), ("fresh_python", fresh)]
            if i % 2:
                order.reverse()  # rotate so neither always runs first
            for name, fn in order:
                lat[name].append(_timed(fn))
            if i % 4 == 0:
                lat["sandbox_fallback"].append(_timed(fallback_run))
                pair = [("grade_copy", graded), ("check_in_tree", in_tree)]
                for name, fn in pair if i % 8 else pair[::-1]:
                    lat[name].append(_timed(fn))
        latency = {name: _summary(values) for name, values in lat.items()}
        ratio = latency["sandbox"]["p50_ms"] / latency["fresh_python"]["p50_ms"]
        through = {"sandbox": _throughput(sandboxed, sessions, seconds),
                   "fresh_python": _throughput(fresh, sessions, seconds)}
        boundary = box.boundary
    return {
        "schema": "openenv.bench.sandbox/1",
        "interpreter": python,
        "boundary": {k: boundary[k] for k in ("runner", "privileges", "network", "container", "gvisor_runsc")},
        "latency": latency,
        "p50_ratio_sandbox_vs_fresh": round(ratio, 3),
        "goal_p50_ratio": GOAL_RATIO,
        "goal_met": ratio <= GOAL_RATIO,
        "p50_ratio_grade_copy_vs_check_in_tree": round(latency["grade_copy"]["p50_ms"]
                                                       / latency["check_in_tree"]["p50_ms"], 3),
        "throughput": through,
        "throughput_ratio": round(through["sandbox"]["per_s"] / max(through["fresh_python"]["per_s"], 1e-9), 2),
    }


def _print(report: dict[str, Any]) -> None:
    lat = report["latency"]
    print(f"print(1), {lat['sandbox']['n']} samples each, interleaved ({report['interpreter']})")
    print(f"{'runner':<22}{'p50 ms':>10}{'p99 ms':>10}{'mean ms':>10}")
    for name in ("sandbox", "fresh_python", "sandbox_fallback", "grade_copy", "check_in_tree"):
        s = lat[name]
        print(f"{name:<22}{s['p50_ms']:>10.2f}{s['p99_ms']:>10.2f}{s['mean_ms']:>10.2f}")
    verdict = "met" if report["goal_met"] else "NOT met"
    print(f"sandbox p50 / fresh python p50 = {report['p50_ratio_sandbox_vs_fresh']:.3f} "
          f"(goal <= {report['goal_p50_ratio']}: {verdict})")
    print(f"grade_copy p50 / check in the tree p50 = {report['p50_ratio_grade_copy_vs_check_in_tree']:.3f} "
          "(a small git tree copied, a fresh grading execution)")
    for name, t in report["throughput"].items():
        print(f"throughput, {t['sessions']} concurrent sessions, {name}: {t['per_s']:.0f} executions/s "
              f"({t['failures']} failures)")
    print(f"boundary: {report['boundary']}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sandbox", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="100 samples and 3 s of throughput (CI)")
    parser.add_argument("--samples", type=int, default=None)
    parser.add_argument("--seconds", type=float, default=None)
    parser.add_argument("--sessions", type=int, default=16)
    parser.add_argument("--out", type=Path, default=None, help="write the JSON report here")
    args = parser.parse_args(argv)
    samples = args.samples or (100 if args.quick else 1000)
    seconds = args.seconds or (3.0 if args.quick else 15.0)
    report = measure(samples, seconds, args.sessions)
    _print(report)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
