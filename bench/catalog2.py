"""``python -m bench.catalog2 [--quick] [--out PATH]``: the Atari and Jupyter envs, in-process.

Measures (issue 30's "measured" rows for these two envs), interleaved where two things are
compared so that both see the same machine load:

* Atari: agent steps per second (frame skip 4, so 4 emulator frames a step) of Pong with RAM only,
  with the 84x84 grayscale frame, and with the PNG image too;
* the persistent kernel's per-call latency (``x = x + 1`` in the ``jupyter`` env) against the
  ``coding`` env's fresh sandboxed process per snippet (``print(1)``), p50/p99. Goal: the kernel's
  p50 at most 0.3x the fresh process's.

Prints JSON (and writes it to ``--out``). Goals are reported, never asserted; the exit status is
0 whenever it ran.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["GOAL_RATIO", "main", "measure_atari", "measure_kernel"]

GOAL_RATIO = 0.3


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _ms(samples: list[float]) -> dict[str, float]:
    return {"n": len(samples), "p50_ms": round(_pct(samples, 0.5) * 1e3, 3),
            "p99_ms": round(_pct(samples, 0.99) * 1e3, 3)}


def measure_atari(steps: int) -> dict[str, Any]:
    from openenv_env_atari import AtariAction, AtariEnv

    rows: dict[str, Any] = {}
    for label, options in (("ram", {"obs_type": "ram"}), ("grayscale84", {}), ("grayscale84+png", {"image": True})):
        env, rng = AtariEnv(), random.Random(0)
        obs = env.reset(seed=1, game="pong", max_steps=steps, **options)
        moves = [AtariAction(action=a) for a in obs.legal_actions]  # type: ignore[arg-type]
        start, played = time.perf_counter(), 0
        while not obs.done:  # bounded by max_steps
            obs = env.step(rng.choice(moves))
            played += 1
        elapsed = time.perf_counter() - start
        rows[label] = {"steps": played, "steps_per_s": round(played / elapsed, 1),
                       "frames_per_s": round(4 * played / elapsed, 1)}
        env.close()
    return rows


def measure_kernel(samples: int) -> dict[str, Any]:
    from openenv_env_coding.env import CodeAction, CodingEnv
    from openenv_env_jupyter import JupyterAction, JupyterEnv

    kernel, coding = JupyterEnv(), CodingEnv()
    try:
        kernel.reset(kind="free", max_steps=samples + 2)
        kernel.step(JupyterAction(code="x = 0"))
        coding.reset(seed=0)
        persistent: list[float] = []
        fresh: list[float] = []
        for _ in range(samples):  # interleaved: both see the same load
            start = time.perf_counter()
            kernel.step(JupyterAction(code="x = x + 1"))
            persistent.append(time.perf_counter() - start)
            start = time.perf_counter()
            coding.step(CodeAction(code="print(1)"))
            fresh.append(time.perf_counter() - start)
        ratio = _pct(persistent, 0.5) / _pct(fresh, 0.5)
        return {"persistent_kernel": _ms(persistent), "coding_fresh_process": _ms(fresh),
                "p50_ratio": round(ratio, 3), "goal_ratio": GOAL_RATIO, "goal_met": ratio <= GOAL_RATIO}
    finally:
        kernel.close()
        coding.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.catalog2", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and samples (CI)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    result = {"atari": measure_atari(300 if args.quick else 3000),
              "kernel": measure_kernel(20 if args.quick else 200)}
    text = json.dumps(result, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
