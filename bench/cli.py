"""``python -m bench`` (what ``nox -s bench`` runs): parse options, run, print, write JSON.

Modes: default (full: 3 rounds at 1/8/64/256 sessions, 4 s windows, plus the 2,048-session scale
test), ``--quick`` (1 round at 1/64 sessions with short windows, plus a 256-session 5 s scale
test: about 30 s, what CI runs), ``--scale`` (only the 2,048-session, 60 s scale test).
The exit status is 0 whenever the benchmark ran, whatever the numbers; it is 1 only when nothing
could be measured at all (so CI notices a broken benchmark, not a busy machine).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench import clientside, procfs, report, suite, targets
from bench.docker_ready import docker_start_to_ready

__all__ = ["main"]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="about 30 s: 1 round, short windows (CI)")
    mode.add_argument("--scale", action="store_true", help="only the scale test (2,048 sessions for 60 s)")
    p.add_argument("--runs", type=int, help="rounds (median reported); default 3, quick 1")
    p.add_argument("--sizes", help="comma-separated session counts, e.g. 1,8,64,256")
    p.add_argument("--window", type=float, help="measurement window per phase, seconds")
    p.add_argument("--targets", help=f"comma-separated subset of {','.join(targets.ALL_TARGETS)}")
    p.add_argument("--no-scale", action="store_true", help="skip the scale test")
    p.add_argument("--scale-sessions", type=int, help="sessions in the scale test")
    p.add_argument("--scale-hold", type=float, help="seconds the scale test holds its sessions")
    p.add_argument("--no-docker", action="store_true", help="skip the Docker start-to-ready measurement")
    p.add_argument("--no-client", action="store_true",
                   help="skip the client-side rows (REST client vs raw httpx, `openenv --help` start time)")
    p.add_argument("--no-pin", action="store_true", help="do not pin server and load generator to separate CPUs")
    p.add_argument("--no-client-deflate", action="store_true",
                   help="load generator does not offer permessage-deflate (default: offers it, like the "
                        "websockets client and so upstream's EnvClient)")
    p.add_argument("--upstream-python", type=Path,
                   default=Path(os.environ.get("OPENENV_UPSTREAM_PYTHON")
                                or targets.ROOT / ".nox" / "upstream-openenv-0.10" / "bin" / "python"),
                   help="interpreter of the venv holding openenv==0.10.0")
    p.add_argument("--out", type=Path, help="JSON output path (default bench-results/bench-<mode>-<time>.json)")
    return p


def _settings(args: argparse.Namespace) -> suite.Settings:
    base = suite.QUICK if args.quick else suite.SCALE if args.scale else suite.FULL
    s = replace(base)
    if args.runs is not None:
        s.runs = max(1, args.runs)
    if args.sizes:
        s.sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    if args.window:
        s.window_s = s.http_window_s = args.window
    if args.targets:
        s.targets = [t.strip() for t in args.targets.split(",") if t.strip()]
    if args.scale_sessions:
        s.scale_sessions = args.scale_sessions
    if args.scale_hold:
        s.scale_hold_s = args.scale_hold
    s.pin = not args.no_pin
    s.offer_deflate = not args.no_client_deflate
    return s


_T0 = time.monotonic()


def _log(message: str) -> None:
    print(f"[{time.monotonic() - _T0:6.1f}s] {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    s = _settings(args)
    started = time.monotonic()
    result: dict[str, Any] = {
        "version": 1, "mode": s.mode,
        "started_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": procfs.machine_info(),
    }
    measured = False
    if s.runs and s.sizes:
        raw = suite.run_rounds(s, args.upstream_python, _log)
        result.update(raw)
        result["summary"] = report.summarise(raw)
        result["stacks"] = _stacks(raw)
        measured = any("failed" not in r for rnd in raw["rounds"] for r in rnd.values())
    else:
        result["settings"] = {**vars(s)}
        result["pinning"] = procfs.pinning_plan() if s.pin else {"server": None, "load": None}
    if not args.no_client and s.mode != "scale":
        plan = procfs.pinning_plan() if s.pin else {"server": None, "load": None}
        result["client"] = clientside.run(clientside.QUICK if s.mode == "quick" else clientside.FULL, _log, plan)
        measured = measured or "failed" not in result["client"]["rest"]
    if not args.no_scale and s.scale_sessions:
        result["scale"] = suite.run_scale(s, _log)
        measured = measured or "opened" in result["scale"]
    if not args.no_docker and s.mode != "scale":
        n, limit = (1, 90.0) if s.mode == "quick" else (5, 300.0)
        _log("docker start-to-ready ...")
        result["docker"] = docker_start_to_ready(n, limit)
    result["elapsed_s"] = round(time.monotonic() - started, 1)
    report.print_report(result)
    out = args.out or targets.ROOT / "bench-results" / (
        f"bench-{s.mode}-{dt.datetime.now().strftime('%Y%m%d-%H%M%S')}.json")
    report.write_json(result, out)
    print(f"JSON: {out}  (took {result['elapsed_s']} s)")
    return 0 if measured else 1


def _stacks(raw: dict[str, Any]) -> dict[str, Any]:
    """The resolved stack of each target (ours runs through the same ``serve`` as bare-shipped)."""
    stacks: dict[str, Any] = {}
    for rnd in raw.get("rounds", []):
        for key, res in rnd.items():
            if res.get("stack") and key not in stacks:
                stacks[key] = res["stack"]
    shipped = stacks.get("bare-shipped")
    if shipped:
        for key in ("ours-sync", "ours-async"):
            if any(key in rnd for rnd in raw.get("rounds", [])):
                stacks[key] = {**shipped, "note": "same openenv.server.serve as bare-shipped"}
    order = [k for k in targets.ALL_TARGETS if k in stacks] + [k for k in stacks if k not in targets.ALL_TARGETS]
    return {k: stacks[k] for k in order}


if __name__ == "__main__":
    sys.exit(main())
