"""``python -m bench.miniwob [--quick] [--sessions 1,8,32] [--out PATH]``: MiniWoB on Chromium, in-process.

Measures (issue 30's "measured" row for the browser env), for 1, 8 and 32 concurrent sessions
(``--quick``: 1 and 8, fewer steps):

* steps per second, all sessions together and per session: each session is a ``MiniWoBEnv`` on
  a thread of its own (as the server runs blocking envs) stepping click-button with a click on a
  fixed point of the task area, screenshot on (the default); one more row at 1 session without
  the screenshot shows what the PNG costs;
* memory: the resident set of this process plus every Chromium process below it (one shared
  browser, one renderer per context) as the sum of their PSS (shared pages divided among the
  processes that map them), read from /proc while all sessions are open, and that
  total divided by the sessions (``pss_per_session_mib``), next to the idle baseline before any
  session.

The task's own time limit is lifted (``time_limit_ms``) and ``max_steps`` set to the steps asked
for, so every session plays exactly its steps. Prints JSON (and writes it to ``--out``); nothing
is asserted; the exit status is 0 whenever it ran. Needs Debian's Chromium (/usr/bin/chromium).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.procfs import rss_mib

__all__ = ["main", "measure", "tree_pss_mib"]


def pss_mib(pid: int) -> float | None:
    """Proportional set size of ``pid`` in MiB: its private pages plus its share of shared ones."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return None


def tree_pss_mib() -> float:
    """Memory of this process and of every process below it (the browser's), in MiB: the sum of
    their PSS (summing RSS would count Chromium's shared pages once per process, ~10 per browser);
    RSS where PSS is unreadable."""
    from openenv_env_miniwob.browser import descendants

    pids = [os.getpid(), *descendants(os.getpid())]
    return round(sum(pss_mib(pid) or rss_mib(pid) or 0.0 for pid in pids), 1)


def measure(sessions: int, steps: int, *, screenshot: bool = True) -> dict[str, Any]:
    """``sessions`` envs stepped concurrently, ``steps`` each; steps/s and RSS."""
    from openenv_env_miniwob import MiniWoBAction, MiniWoBEnv

    idle = tree_pss_mib()
    envs = [MiniWoBEnv() for _ in range(sessions)]
    action = MiniWoBAction.model_validate({"command": {"kind": "click_at", "x": 150, "y": 200}})
    try:
        with ThreadPoolExecutor(max_workers=sessions) as pool:
            # Resets are not timed: the first launches Chromium.
            list(pool.map(lambda e: e[1].reset(seed=e[0], page="click-button", max_steps=steps,
                                               time_limit_ms=3_600_000, screenshot=screenshot), enumerate(envs)))

            def play(env: Any) -> int:
                played = 0
                obs = None
                while obs is None or not obs.done:  # bounded by max_steps
                    obs = env.step(action)
                    played += 1
                return played

            start = time.perf_counter()
            played = sum(pool.map(play, envs))
            elapsed = time.perf_counter() - start
            loaded = tree_pss_mib()
    finally:
        for env in envs:
            env.close()
    return {"sessions": sessions, "screenshot": screenshot, "steps": played,
            "steps_per_s": round(played / elapsed, 1), "steps_per_s_per_session": round(played / elapsed / sessions, 1),
            "step_ms_mean": round(elapsed / (played / sessions) * 1e3, 2), "pss_idle_mib": idle,
            "pss_total_mib": loaded, "pss_per_session_mib": round(loaded / sessions, 1),
            "pss_added_per_session_mib": round((loaded - idle) / sessions, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.miniwob", description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="1 and 8 sessions, 20 steps each (CI)")
    parser.add_argument("--sessions", default=None, help="comma-separated session counts (default 1,8,32)")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    from openenv_env_miniwob.browser import chromium_path

    if chromium_path() is None:
        print(json.dumps({"skipped": "no Chromium at /usr/bin/chromium (bash .ci/browser-setup.sh)"}))
        return 0
    counts = [int(n) for n in (args.sessions or ("1,8" if args.quick else "1,8,32")).split(",")]
    steps = 20 if args.quick else 100
    rows = [measure(1, steps, screenshot=False)] + [measure(n, steps) for n in counts]
    text = json.dumps({"miniwob": rows}, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
