"""``python -m bench.codinggrade [--quick]``: the coding env's grading of a submission, recorded and
replayed outside the solution's process, against the one-process grading it replaced, in one run.

For every built-in task, the real fix is graded on all its hidden tests (one ``grade_copy`` per
test, as the env does on submit) both ways, alternating task by task so that both see the same
machine load:

* ``replay``: ``openenv_env_coding.tasks.grade`` (the sandbox records each call's plain-data result,
  the server replays the test on the records; what the env does now);
* ``one_process``: the solution and the test ``exec``'d in one grading process, the verdict being
  that process's (what the env did before; forgeable from inside the solution).

Prints p50/p90 of a submission's grading per task and in all, the ratio replay / one-process, and
the server-side replay alone (``replay.judge``) per test. Writes JSON (``--out``). Nothing is
asserted; the exit status is 0 whenever it ran.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from openenv_env_coding.replay import harness, judge, solution_names
from openenv_env_coding.tasks import SOLUTION_FILE, TEST_LIMITS, grade, load_tasks
from openenv_sandbox import Sandbox, grade_copy

__all__ = ["ORACLES", "main", "measure"]

#: The real fix of every built-in task.
ORACLES = {
    "add": "def add(a, b):\n    return a + b\n",
    "reverse_string": "def reverse_string(s):\n    return s[::-1]\n",
    "fizzbuzz": "def fizzbuzz(n):\n    return 'FizzBuzz' if n % 15 == 0 else 'Fizz' if n % 3 == 0 else "
                "'Buzz' if n % 5 == 0 else str(n)\n",
    "is_palindrome": "def is_palindrome(s):\n    t = [c.lower() for c in s if c.isalnum()]\n    return t == t[::-1]\n",
    "fibonacci": "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n",
    "count_vowels": "def count_vowels(s):\n    return sum(c in 'aeiouAEIOU' for c in s)\n",
    "flatten": "def flatten(xs):\n    out = []\n    for x in xs:\n"
               "        out.extend(flatten(x) if isinstance(x, list) else [x])\n    return out\n",
    "two_sum": "def two_sum(nums, target):\n    seen = {}\n    for j, x in enumerate(nums):\n"
               "        if target - x in seen:\n            return (seen[target - x], j)\n"
               "        seen[x] = j\n    return None\n",
    "word_count": "def word_count(text):\n    out = {}\n    for w in text.lower().split():\n"
                  "        out[w] = out.get(w, 0) + 1\n    return out\n",
    "gcd": "def gcd(a, b):\n    while b:\n        a, b = b, a % b\n    return a\n",
    "is_prime": "def is_prime(n):\n    if n < 2:\n        return False\n    i = 2\n    while i * i <= n:\n"
                "        if n % i == 0:\n            return False\n        i += 1\n    return True\n",
    "run_length_encode": "def rle(s):\n    out = []\n    for c in s:\n        if out and out[-1][0] == c:\n"
                         "            out[-1] = (c, out[-1][1] + 1)\n        else:\n            out.append((c, 1))\n"
                         "    return out\n",
    "roman_to_int": "def roman_to_int(s):\n    v = dict(I=1, V=5, X=10, L=50, C=100, D=500, M=1000)\n"
                    "    return sum(-v[a] if v[a] < v[b] else v[a] for a, b in zip(s, s[1:])) + v[s[-1]]\n",
    "merge_sorted": "def merge_sorted(a, b):\n    return sorted(a + b)\n",
}


def _one_process(test: str) -> str:
    """The harness coding used before: the solution and the test in one namespace, one process."""
    return (f"with open({SOLUTION_FILE!r}, encoding='utf-8') as _f:\n    _source = _f.read()\n"
            "_ns = {'__name__': 'solution'}\n"
            f"exec(compile(_source, {SOLUTION_FILE!r}, 'exec'), _ns)\n"
            f"exec(compile({test!r}, '<test>', 'exec'), _ns)\n")


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def measure(rounds: int) -> dict[str, Any]:
    tasks = load_tasks()
    box = Sandbox(slots=2)
    try:
        per_task: dict[str, dict[str, list[float]]] = {t.id: {"replay": [], "one_process": []} for t in tasks}
        judged: list[float] = []
        failures: list[str] = []
        for task in tasks:  # warm-up (starts the zygote), and the real fix must pass both ways
            if not all(o.passed for o in grade(box, ORACLES[task.id], task.tests)):
                failures.append(task.id)
        for index in range(rounds):
            for task in tasks:
                solution = ORACLES[task.id]
                order = ("replay", "one_process") if index % 2 == 0 else ("one_process", "replay")
                for way in order:
                    start = time.perf_counter()
                    if way == "replay":
                        grade(box, solution, task.tests)
                    else:
                        for test in task.tests:
                            grade_copy(box, _one_process(test), files={SOLUTION_FILE: solution}, limits=TEST_LIMITS)
                    per_task[task.id][way].append(time.perf_counter() - start)
                if index == 0:  # the server-side replay alone, on the records of a real grading
                    for test in task.tests:
                        names = solution_names(test)
                        verdict = grade_copy(box, harness(test, names, SOLUTION_FILE),
                                             files={SOLUTION_FILE: solution}, limits=TEST_LIMITS, payload=True)
                        start = time.perf_counter()
                        judge(test, names, verdict.payload)
                        judged.append(time.perf_counter() - start)
    finally:
        box.close()
    every = {way: [s for t in per_task.values() for s in t[way]] for way in ("replay", "one_process")}

    def summary(samples: list[float]) -> dict[str, float]:
        return {"p50_ms": round(statistics.median(samples) * 1000, 2), "p90_ms": round(_pct(samples, 0.9) * 1000, 2)}

    return {
        "rounds": rounds, "tasks": len(tasks), "oracle_failures": failures,
        "per_task": {tid: {way: summary(s) for way, s in ways.items()} for tid, ways in per_task.items()},
        "all": {way: summary(s) for way, s in every.items()},
        "p50_ratio_replay_vs_one_process": round(statistics.median(every["replay"])
                                                 / statistics.median(every["one_process"]), 3),
        "judge_per_test_p50_ms": round(statistics.median(judged) * 1000, 3),
    }


def _print(report: dict[str, Any]) -> None:
    print(f"coding: grading one submission of the real fix (all hidden tests), {report['rounds']} rounds")
    print(f"{'task':<20}{'replay p50 ms':>15}{'one-process p50 ms':>20}")
    for tid, ways in report["per_task"].items():
        print(f"{tid:<20}{ways['replay']['p50_ms']:>15.2f}{ways['one_process']['p50_ms']:>20.2f}")
    both = report["all"]
    print(f"{'all':<20}{both['replay']['p50_ms']:>15.2f}{both['one_process']['p50_ms']:>20.2f}")
    print(f"replay p50 / one-process p50 = {report['p50_ratio_replay_vs_one_process']:.3f}; the server-side "
          f"replay alone: {report['judge_per_test_p50_ms']:.3f} ms per test (p50)")
    if report["oracle_failures"]:
        print(f"the real fix FAILED on: {', '.join(report['oracle_failures'])}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.codinggrade", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds (CI)")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--out", type=Path, default=None, help="write the JSON report here")
    args = parser.parse_args(argv)
    report = measure(args.rounds or (3 if args.quick else 20))
    _print(report)
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
