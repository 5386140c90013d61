"""Where a server's CPU goes per step: ``py-spy`` samples of one target under N-session load.

``python -m bench.profile TARGET [--sessions 64] [--seconds 10] [--http] [--py-spy PATH] [--out DIR]``

Starts the target (pinned like in the benchmark), drives closed-loop steps with the load
generator, and meanwhile records the server with ``py-spy record --format raw`` (collapsed
stacks, idle samples excluded, ``--nonblocking`` so the server is never paused). It prints:

* µs of server CPU per step (from ``/proc``, as in the benchmark) and the sample count;
* where the samples fall by layer (the innermost frame of a known package decides: asyncio,
  uvicorn, websockets, starlette, openenv kernel, ws transport, pydantic, the env, ...), as a
  share of samples and as µs per step;
* the heaviest functions by self time, and by inclusive time.

py-spy is not a dependency of the project: install it anywhere (``uv tool install py-spy`` or
``pip install py-spy``) and pass ``--py-spy`` if it is not on ``PATH``.
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import procfs, targets

__all__ = ["LAYERS", "analyse", "main"]

#: (layer, substrings of a frame's file path): the first match on the innermost frame wins.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("env (echo)", ("openenv_env_echo", "upstream_echo.py")),
    ("openenv kernel: sessions", ("openenv/sessions.py",)),
    ("openenv kernel: types/wire", ("openenv/types.py", "openenv/wire.py")),
    ("openenv kernel: other", ("/openenv/",)),
    ("ws transport (ours)", ("openenv_transport_ws",)),
    ("rest transport (ours)", ("openenv_transport_rest",)),
    ("bare echo app", ("bench/bare_echo.py",)),
    ("pydantic", ("pydantic",)),
    ("starlette", ("starlette",)),
    ("fastapi", ("fastapi",)),
    ("websockets (sans-I/O)", ("websockets/",)),
    ("uvicorn ws protocol", ("uvicorn/protocols/websockets",)),
    ("uvicorn other", ("uvicorn",)),
    ("asyncio", ("asyncio/",)),
    ("threading/executor", ("threading.py", "concurrent/futures")),
    ("json/uuid/stdlib", ("json/", "uuid.py", "enum.py", "typing.py", "inspect.py", "logging/")),
]


def _layer(frame: str) -> str | None:
    for name, needles in LAYERS:
        if any(n in frame for n in needles):
            return name
    return None


def analyse(raw: str, top: int = 25) -> dict[str, Any]:
    """Collapsed stacks (``a;b;c count`` lines) → shares by layer and top functions."""
    total = 0
    by_layer: collections.Counter[str] = collections.Counter()
    self_time: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    for line in raw.splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [f for f in stack.split(";") if f]
        if not frames:
            continue
        total += count
        self_time[_short(frames[-1])] += count
        for f in set(frames):
            inclusive[_short(f)] += count
        # Attribute the sample to the innermost frame that belongs to a known layer.
        layer = next((lay for f in reversed(frames) if (lay := _layer(f))), "other")
        by_layer[layer] += count
    return {
        "samples": total,
        "layers": [(name, n, round(n / total, 4)) for name, n in by_layer.most_common()] if total else [],
        "self": [(name, n, round(n / total, 4)) for name, n in self_time.most_common(top)] if total else [],
        "inclusive": [(name, n, round(n / total, 4)) for name, n in inclusive.most_common(top)] if total else [],
    }


def _short(frame: str) -> str:
    """``func (path/to/file.py:12)`` → ``func (file.py:12)`` with the package kept for context."""
    name, _, where = frame.partition(" (")
    where = where.rstrip(")")
    parts = where.split("/")
    short = "/".join(parts[-2:]) if len(parts) > 1 else where
    return f"{name} ({short})"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.profile", description=__doc__.splitlines()[0])
    p.add_argument("target", help=f"one of {', '.join(targets.ALL_TARGETS)}, or bare:LOOP:HTTP:WS[:on|off]")
    p.add_argument("--sessions", type=int, help="concurrent sessions (default 64; 8 with --http)")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    p.add_argument("--py-spy", default=shutil.which("py-spy") or "py-spy")
    p.add_argument("--upstream-python", type=Path,
                   default=targets.ROOT / ".nox" / "upstream-openenv-0.10" / "bin" / "python")
    p.add_argument("--out", type=Path, help="directory to keep the raw stacks and the JSON summary in")
    p.add_argument("--top", type=int, default=25)
    p.add_argument("--http", action="store_true", help="HTTP steps (8 keep-alive connections by default)")
    args = p.parse_args(argv)
    if args.sessions is None:
        args.sessions = 8 if args.http else 64
    plan = procfs.pinning_plan()
    procfs.pin(plan["load"])
    with tempfile.TemporaryDirectory(prefix="openenv-profile-") as tmp:
        workdir = Path(tmp)
        templates = targets.capture_templates(workdir, 300)
        tpath = workdir / "templates.json"
        tpath.write_text(json.dumps(templates))
        target = targets.make_targets([args.target], templates=tpath, max_sessions=max(300, args.sessions + 44),
                                      upstream_python=args.upstream_python)[0][0]
        run = targets.start(target, workdir, plan["server"])
        raw_path = (args.out or workdir) / f"{args.target}-{args.sessions}.stacks.txt"
        raw_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            cfg = {"host": targets.HOST, "port": run.port, "server_pid": run.pid, "offer_deflate": True,
                   "reset_frame": targets.RESET_FRAME, "step_frame": targets.STEP_FRAME,
                   "close_frame": targets.CLOSE_FRAME, "http_step_body": targets.HTTP_STEP_BODY,
                   "cpus": plan["load"], "phases": [{"kind": "http" if args.http else "steps", "name": "profile",
                                                     "mode": target.http_mode, "sessions": args.sessions,
                                                     "warmup_s": 1.0, "window_s": args.seconds + 2.0}]}
            cfg_path = workdir / "cfg.json"
            cfg_path.write_text(json.dumps(cfg))
            load = subprocess.Popen([sys.executable, "-m", "bench.loadgen", str(cfg_path)], cwd=str(targets.ROOT),
                                    env=targets.our_env(), stdout=subprocess.PIPE, text=True)
            time.sleep(1.5)  # sessions open and warm up before sampling starts
            # py-spy shares the server's CPU: the load generator keeps its own, so the server stays
            # saturated and its CPU per step is measured under the same conditions as the benchmark.
            spy = subprocess.run([args.py_spy, "record", "--pid", str(run.pid), "--duration", str(int(args.seconds)),
                                  "--rate", str(args.rate), "--format", "raw", "--nonblocking", "--output",
                                  str(raw_path)], capture_output=True, text=True, timeout=args.seconds + 60,
                                 preexec_fn=lambda: procfs.pin(plan["server"]))
            out, _ = load.communicate(timeout=args.seconds + 60)
        finally:
            run.stop()
        if spy.returncode != 0:
            print(f"py-spy failed: {spy.stderr[-1000:]}", file=sys.stderr)
            return 1
        phase = json.loads(out.strip().splitlines()[-1])["phases"][0]
        result = analyse(raw_path.read_text(), args.top)
        result.update(target=args.target, sessions=args.sessions, steps_per_s=phase.get("steps_per_s"),
                      server_cpu_us_per_step=phase.get("server_cpu_us_per_step"),
                      server_sys_us_per_step=phase.get("server_sys_us_per_step"),
                      server_cpu_util=phase.get("server_cpu_util"))
        if args.out:
            (args.out / f"{args.target}-{args.sessions}.summary.json").write_text(json.dumps(result, indent=2))
    _print(result)
    return 0


def _print(result: dict[str, Any]) -> None:
    us = result.get("server_cpu_us_per_step") or 0.0
    print(f"{result['target']} @ {result['sessions']} sessions: {result.get('steps_per_s')} steps/s, "
          f"{us} µs CPU/step ({result.get('server_sys_us_per_step')} in the kernel), server CPU use "
          f"{result.get('server_cpu_util')}, {result['samples']} samples")
    print("\nby layer (innermost known frame)       share    µs/step")
    for name, _n, share in result["layers"]:
        print(f"  {name:<36} {share * 100:5.1f}%  {share * us:7.1f}")
    for title, key in (("self time", "self"), ("inclusive time", "inclusive")):
        print(f"\ntop functions by {title}")
        for name, _n, share in result[key]:
            print(f"  {share * 100:5.1f}%  {share * us:6.1f} µs  {name}")


if __name__ == "__main__":
    sys.exit(main())
