"""``python -m bench.catalog2 [--quick] [--out PATH]``: the Atari, MuJoCo and Jupyter envs, in-process.

Measures (issue 30's "measured" rows for these envs), interleaved where two things are
compared so that both see the same machine load:

* Atari: agent steps per second (frame skip 4, so 4 emulator frames a step) of Pong with RAM only,
  with the 84x84 grayscale frame, and with the PNG image too;
* MuJoCo: agent steps per second of random actions (one physics step of the task's own frame
  skip each) for InvertedPendulum, Hopper, HalfCheetah and Ant with the state vector, and Hopper
  with a 128x128 offscreen-rendered PNG on every step (a failed episode is reset, not counted);
* the persistent kernel's per-call latency (the ``jupyter`` env) against the ``coding`` env's
  fresh sandboxed process per snippet, the same snippet (``SNIPPET``) in both, p50/p99. Goal: the
  kernel's p50 at most 0.3x the fresh process's. A cold ``python -c SNIPPET`` per call is
  measured beside them for scale (what a fresh interpreter costs without the coding env's zygote),
  and the kernel's own timeline of a call (when it sent each message, from its stamps) for the
  snippet and for an empty silent cell, which shows how much of a call is the kernel's floor.

Prints JSON (and writes it to ``--out``). Goals are reported, never asserted; the exit status is
0 whenever it ran.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["GOAL_RATIO", "MUJOCO_ROWS", "SNIPPET", "main", "kernel_timeline", "measure_atari", "measure_kernel",
           "measure_mujoco"]

GOAL_RATIO = 0.3
#: The code both the kernel and the fresh process run on every call: no state needed, some output.
SNIPPET = "total = sum(range(100))\nprint(total)"
#: MuJoCo rows: label -> reset options (the image row plays fewer steps: it renders every one).
MUJOCO_ROWS: dict[str, dict[str, Any]] = {
    "InvertedPendulum-v5": {"env_id": "InvertedPendulum-v5"},
    "Hopper-v5": {"env_id": "Hopper-v5"},
    "HalfCheetah-v5": {"env_id": "HalfCheetah-v5"},
    "Ant-v5": {"env_id": "Ant-v5"},
    "Hopper-v5+png128": {"env_id": "Hopper-v5", "image": True, "image_size": 128},
}


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


def measure_mujoco(steps: int, image_steps: int) -> dict[str, Any]:
    """Agent steps/s of random actions per ``MUJOCO_ROWS`` row (``steps``; ``image_steps`` with images)."""
    from openenv.errors import ValidationError
    from openenv_env_mujoco import MujocoAction, MujocoEnv, random_policy

    rows: dict[str, Any] = {}
    for label, options in MUJOCO_ROWS.items():
        budget = image_steps if options.get("image") else steps
        env, rng = MujocoEnv(), random.Random(0)
        try:
            try:
                obs = env.reset(seed=1, **options)
            except ValidationError as exc:  # no offscreen OpenGL here: the image row says so, the others run
                rows[label] = {"error": str(exc)}
                continue
            moves = [MujocoAction(**random_policy(obs, rng)) for _ in range(64)]  # drawn outside the timing
            played, resets, elapsed = 0, 0, 0.0
            while played < budget:  # bounded: one step per iteration
                if obs.done:  # a fall ends the episode: the reset is not timed
                    obs, resets = env.reset(seed=1 + resets, **options), resets + 1
                start = time.perf_counter()
                obs = env.step(moves[played % len(moves)])
                elapsed += time.perf_counter() - start
                played += 1
            rows[label] = {"steps": played, "resets": resets, "steps_per_s": round(played / elapsed, 1),
                           "us_per_step": round(elapsed / played * 1e6, 1)}
        finally:
            env.close()
    return rows


def measure_kernel(samples: int) -> dict[str, Any]:
    from openenv_env_coding.env import CodeAction, CodingEnv
    from openenv_env_jupyter import JupyterAction, JupyterEnv

    # The coding env ends an episode after max_steps and then answers without running anything:
    # size it to the samples, and check every answer's output, so each timing is of a real run.
    kernel, coding = JupyterEnv(), CodingEnv(max_steps=samples + 2)
    try:
        kernel.reset(kind="free", max_steps=samples + 2)
        coding.reset(seed=0)
        persistent: list[float] = []
        fresh: list[float] = []
        cold: list[float] = []
        for _ in range(samples):  # interleaved: all three see the same load
            start = time.perf_counter()
            ran = kernel.step(JupyterAction(code=SNIPPET))
            persistent.append(time.perf_counter() - start)
            start = time.perf_counter()
            ran_fresh = coding.step(CodeAction(code=SNIPPET))
            fresh.append(time.perf_counter() - start)
            for name, out in (("jupyter", ran), ("coding", ran_fresh)):
                if "4950" not in out.stdout or out.done:
                    raise RuntimeError(f"the {name} env did not run the snippet: {out!r}")
            start = time.perf_counter()
            subprocess.run([sys.executable, "-I", "-c", SNIPPET], capture_output=True, check=True, timeout=60)
            cold.append(time.perf_counter() - start)
        ratio = _pct(persistent, 0.5) / _pct(fresh, 0.5)
        return {"snippet": SNIPPET, "persistent_kernel": _ms(persistent), "coding_fresh_process": _ms(fresh),
                "cold_interpreter": _ms(cold), "p50_ratio": round(ratio, 3),
                "p50_ratio_vs_cold": round(_pct(persistent, 0.5) / _pct(cold, 0.5), 3),
                "goal_ratio": GOAL_RATIO, "goal_met": ratio <= GOAL_RATIO,
                "kernel_timeline_p50_ms": kernel_timeline(samples)}
    finally:
        kernel.close()
        coding.close()


def kernel_timeline(samples: int) -> dict[str, dict[str, float]]:
    """Where a kernel call's time goes: p50 milliseconds from the execute request to each message as
    the kernel stamped it (``PersistentKernel.timeline``), for ``SNIPPET`` and for an empty silent
    cell (the protocol's floor: no code, no output, no history)."""
    import tempfile

    from openenv_env_jupyter.kernel import PersistentKernel

    out: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-kernel-") as folder:
        kernel = PersistentKernel(Path(folder))
        try:
            for label, code, silent in (("snippet", SNIPPET, False), ("empty_silent_cell", "", True)):
                for _ in range(5):  # warm-up
                    kernel.timeline(code, silent=silent)
                runs = [kernel.timeline(code, silent=silent) for _ in range(samples)]
                keys = [k for k in runs[0] if all(k in r for r in runs)]
                out[label] = {k: round(_pct([r[k] / 1e3 for r in runs], 0.5) * 1e3, 3) for k in keys}
        finally:
            kernel.close()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.catalog2", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and samples (CI)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    result = {"atari": measure_atari(300 if args.quick else 3000),
              "mujoco": measure_mujoco(300 if args.quick else 5000, 20 if args.quick else 300),
              "kernel": measure_kernel(20 if args.quick else 200)}
    text = json.dumps(result, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
