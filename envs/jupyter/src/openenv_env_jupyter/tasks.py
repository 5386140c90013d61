"""The graded data tasks: each is (kind, seed); the seed makes its data files and its answer.

The grader runs in the env's process, never in the kernel the agent controls: it recomputes the
answer from the same seeded data and compares the submitted text (numbers within a tolerance,
names case-insensitively).
"""

from __future__ import annotations

import csv
import io
import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from openenv.tasks import InlineTasks

__all__ = ["KINDS", "Problem", "grade", "make_problem", "task_source", "write_files"]

_REGIONS = ("north", "south", "east", "west", "central")
_WORDS = ("data", "model", "kernel", "graph", "vector", "signal", "agent", "reward", "policy", "table")


@dataclass(frozen=True)
class Problem:
    """A task's question, the files it writes into the kernel's folder, and its answer."""

    question: str
    files: dict[str, str]
    answer: str
    numeric: bool


def _sales(rng: random.Random) -> tuple[str, list[tuple[str, int, float]]]:
    rows = [(rng.choice(_REGIONS), rng.randint(1, 40), round(rng.uniform(1.0, 99.0), 2))
            for _ in range(rng.randint(40, 120))]
    text = io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(["region", "units", "price"])
    writer.writerows(rows)
    return text.getvalue(), rows


def _mean_units(rng: random.Random) -> Problem:
    text, rows = _sales(rng)
    mean = sum(r[1] for r in rows) / len(rows)
    return Problem("sales.csv has columns region, units, price. What is the mean of `units`? "
                   "Submit the number (2 decimals are enough).", {"sales.csv": text}, f"{mean:.4f}", True)


def _top_region(rng: random.Random) -> Problem:
    text, rows = _sales(rng)
    revenue: dict[str, float] = dict.fromkeys(_REGIONS, 0.0)
    for region, units, price in rows:
        revenue[region] += units * price
    best = max(sorted(r for r in revenue if revenue[r] > 0), key=lambda r: revenue[r])
    return Problem("sales.csv has columns region, units, price. Which region has the largest total revenue "
                   "(sum of units * price)? Submit the region's name.", {"sales.csv": text}, best, False)


def _count_primes(rng: random.Random) -> Problem:
    n = rng.randint(10_000, 60_000)
    sieve = bytearray([1]) * n
    sieve[:2] = b"\x00\x00"
    for i in range(2, math.isqrt(n - 1) + 1):
        if sieve[i]:
            sieve[i * i::i] = bytearray(len(range(i * i, n, i)))
    return Problem(f"How many prime numbers are smaller than {n}? Submit the count.", {}, str(sum(sieve)), True)


def _word_count(rng: random.Random) -> Problem:
    words = [rng.choice(_WORDS) for _ in range(rng.randint(300, 900))]
    words = [w.upper() if rng.random() < 0.2 else w for w in words]
    target = rng.choice(_WORDS)
    lines = [" ".join(words[i:i + 12]) for i in range(0, len(words), 12)]
    count = sum(1 for w in words if w.lower() == target)
    return Problem(f"How many times does the word {target!r} occur in words.txt, ignoring case? Submit the count.",
                   {"words.txt": "\n".join(lines) + "\n"}, str(count), True)


#: Task kinds and their makers (the seed's generator makes the data).
KINDS: dict[str, Callable[[random.Random], Problem]] = {
    "mean_units": _mean_units, "top_region": _top_region, "count_primes": _count_primes, "word_count": _word_count,
}


def make_problem(kind: str, seed: int) -> Problem:
    """The problem of ``kind`` made from ``seed`` (same seed, same files and answer)."""
    return KINDS[kind](random.Random(f"{kind}:{seed}"))


def write_files(problem: Problem, folder: Path) -> None:
    for name, text in problem.files.items():
        (folder / name).write_text(text, encoding="utf-8")


def grade(problem: Problem, submitted: str) -> tuple[float, str]:
    """1.0 for a right answer, else 0.0, with a line saying why (the answer itself is not revealed)."""
    text = submitted.strip()
    if problem.numeric:
        try:
            value = float(text.replace(",", ""))
        except ValueError:
            return 0.0, f"{text!r} is not a number; this task wants a number"
        ok = math.isclose(value, float(problem.answer), rel_tol=0.0, abs_tol=0.01)
        return (1.0, "correct") if ok else (0.0, "wrong number")
    return (1.0, "correct") if text.lower() == problem.answer.lower() else (0.0, "wrong answer")


def task_source() -> InlineTasks:
    """Every kind with seeds 0..24 (``train``) and 1 000 000..1 000 009 (``test``)."""
    rows = [{"id": f"{kind}-{split}-{seed}", "split": split, "seed": seed, "kind": kind}
            for kind in KINDS for split, seeds in (("train", range(25)), ("test", range(1_000_000, 1_000_010)))
            for seed in seeds]
    return InlineTasks(rows, name="jupyter data tasks")
