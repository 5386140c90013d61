"""Runs the benchmark: rounds of every target in rotated order, then the scale test.

Promises:

* One target at a time: start it (timing start-to-ready), let it settle, sample its idle memory
  and threads, run one load-generator process through every phase, stop it. Nothing else of
  ours runs meanwhile, so targets never compete with each other.
* Round ``r`` starts with the ``r``-th target (rotation), so slow drift of a shared machine
  spreads over every target instead of always hitting the same one.
* The server is pinned to one CPU and the load generator to another (when there are two);
  the load generator reports its own CPU use so a client-bound measurement is visible.
* Everything is bounded: start-up timeouts, phase windows, per-phase limits, a drain timeout.
  A target that fails to start or crashes is reported (with its log tail) and the run goes on.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench import procfs, targets

__all__ = ["FULL", "QUICK", "SCALE", "Settings", "run_rounds", "run_scale"]


@dataclass
class Settings:
    """Sizes and windows of one benchmark mode."""

    mode: str
    runs: int
    sizes: list[int]
    warmup_s: float
    window_s: float
    setup_count: int
    http_sessions: int
    http_window_s: float
    max_steps: int
    scale_sessions: int
    scale_hold_s: float
    scale_interval_s: float
    settle_s: float = 0.3
    #: Batched steps (our ``step_batch`` extension): sessions, and actions per frame; 0 = off.
    batch_sessions: int = 64
    batch_size: int = 16
    #: Multiplexed sessions (our ``sessions`` extension): the ``batch_sessions`` sessions spread
    #: over this many connections, one ``step_many`` frame per connection; 0 = off.
    vector_connections: int = 4
    offer_deflate: bool = True
    pin: bool = True
    targets: list[str] = field(default_factory=lambda: list(targets.ALL_TARGETS))


QUICK = Settings("quick", runs=1, sizes=[1, 64], warmup_s=0.15, window_s=0.5, setup_count=10,
                 http_sessions=8, http_window_s=0.5, max_steps=200_000,
                 scale_sessions=256, scale_hold_s=5.0, scale_interval_s=0.25, settle_s=0.1)
FULL = Settings("full", runs=3, sizes=[1, 8, 64, 256], warmup_s=1.0, window_s=4.0, setup_count=30,
                http_sessions=8, http_window_s=4.0, max_steps=5_000_000,
                scale_sessions=2048, scale_hold_s=60.0, scale_interval_s=0.5)
SCALE = Settings("scale", runs=0, sizes=[], warmup_s=0, window_s=0, setup_count=0, http_sessions=0,
                 http_window_s=0, max_steps=0, scale_sessions=2048, scale_hold_s=60.0,
                 scale_interval_s=0.5)


def _phases(s: Settings, http_mode: str, batch: bool = False) -> list[dict[str, Any]]:
    phases: list[dict[str, Any]] = [{"kind": "setup", "name": "setup", "count": s.setup_count, "timeout_s": 30,
                                     "limit_s": 60, "settle_s": s.settle_s}]
    for n in s.sizes:
        phases.append({
            "kind": "steps", "name": f"steps-{n}", "sessions": n, "warmup_s": s.warmup_s, "window_s": s.window_s,
            "max_steps": s.max_steps, "setup_timeout_s": 30, "drain_s": 5,
            "limit_s": 30 + s.warmup_s + s.window_s + 15, "settle_s": s.settle_s,
        })
    if batch and s.batch_sessions and s.batch_size:
        phases.append({
            "kind": "batch", "name": f"batch-{s.batch_sessions}", "sessions": s.batch_sessions,
            "batch": s.batch_size, "warmup_s": s.warmup_s, "window_s": s.window_s, "max_steps": s.max_steps,
            "setup_timeout_s": 30, "drain_s": 5, "limit_s": 30 + s.warmup_s + s.window_s + 15,
            "settle_s": s.settle_s,
        })
    if batch and s.batch_sessions and s.vector_connections:
        phases.append({
            "kind": "vector", "name": f"vector-{s.batch_sessions}", "sessions": s.batch_sessions,
            "connections": s.vector_connections, "warmup_s": s.warmup_s, "window_s": s.window_s,
            "max_steps": s.max_steps, "setup_timeout_s": 30, "drain_s": 5,
            "limit_s": 30 + s.warmup_s + s.window_s + 15, "settle_s": s.settle_s,
        })
    if s.http_sessions:
        phases.append({
            "kind": "http", "name": "http", "mode": http_mode, "sessions": s.http_sessions, "warmup_s": s.warmup_s,
            "window_s": s.http_window_s, "setup_timeout_s": 30, "drain_s": 5,
            "limit_s": 30 + s.warmup_s + s.http_window_s + 15, "settle_s": s.settle_s,
        })
    return phases


def _loadgen_config(s: Settings, run: targets.Running, templates: dict[str, Any], plan: dict[str, Any],
                    phases: list[dict[str, Any]]) -> dict[str, Any]:
    ws = templates["ws"]
    return {
        "host": targets.HOST, "port": run.port, "server_pid": run.pid, "ws_path": "/ws",
        "offer_deflate": s.offer_deflate, "reset_frame": targets.RESET_FRAME, "step_frame": targets.STEP_FRAME,
        "close_frame": targets.CLOSE_FRAME, "hello_batch_frame": targets.HELLO_BATCH_FRAME,
        "batch_frame": targets.batch_frame(s.batch_size), "http_step_body": targets.HTTP_STEP_BODY,
        "step_action": targets.STEP_ACTION,
        "expect": ({"reset": ws["reset"], "step_parts": ws["step_parts"], "step_sep": ws["step_sep"]}
                   if run.target.identical else None),
        "cpus": plan["load"], "nofile": 4096 + s.scale_sessions, "phases": phases,
    }


def _run_loadgen(cfg: dict[str, Any], workdir: Path, limit_s: float) -> dict[str, Any]:
    path = workdir / f"loadgen-{time.monotonic_ns()}.json"
    path.write_text(json.dumps(cfg))
    env = dict(targets.our_env())
    env.pop("OPENENV_DIE_WITH_PARENT", None)
    try:
        proc = subprocess.run([sys.executable, "-m", "bench.loadgen", str(path)], cwd=str(targets.ROOT), env=env,
                              capture_output=True, text=True, timeout=limit_s, preexec_fn=procfs.die_with_parent)
    except subprocess.TimeoutExpired:
        return {"failed": f"load generator exceeded {limit_s:.0f} s"}
    if proc.returncode != 0 or not proc.stdout.strip():
        return {"failed": f"load generator exited {proc.returncode}: {proc.stderr[-2000:]}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _measure(s: Settings, target: targets.Target, templates: dict[str, Any], workdir: Path,
             plan: dict[str, Any], log: Any) -> dict[str, Any]:
    try:
        run = targets.start(target, workdir, plan["server"])
    except Exception as exc:
        log(f"  {target.label}: failed to start: {exc}")
        return {"failed": f"start: {exc}"}
    try:
        time.sleep(s.settle_s)
        idle = run.idle_sample()
        phases = _phases(s, target.http_mode, target.batch)
        limit = sum(p.get("limit_s", 60) + p.get("settle_s", 0) for p in phases) + 30
        result = _run_loadgen(_loadgen_config(s, run, templates, plan, phases), workdir, limit)
        result.update(ready_s=round(run.ready_s, 4), idle=idle, stack=run.stack, pid=run.pid)
        if not run.alive():
            result["crashed"] = run.log_tail()
    finally:
        run.stop()
    log(f"  {target.label}: {_one_line(result)}")
    return result


def _one_line(result: dict[str, Any]) -> str:
    if "failed" in result:
        return f"FAILED {result['failed'][:300]}"
    bits = [f"ready {result['ready_s']:.2f}s", f"idle {result['idle'].get('rss_mib') or 0:.0f} MiB"]
    for ph in result.get("phases", []):
        if "failed" in ph:
            bits.append(f"{ph['name']} FAILED")
        elif ph.get("steps_per_s") is not None:
            bits.append(f"{ph['name']} {ph['steps_per_s']:.0f}/s")
    return ", ".join(bits)


def run_rounds(s: Settings, upstream_python: Path | None, log: Any) -> dict[str, Any]:
    """Every round of every target; returns the raw results (see ``report.summarise``)."""
    plan = procfs.pinning_plan() if s.pin else {"server": None, "load": None}
    procfs.pin(plan["load"])  # this orchestrator mostly sleeps; keep it off the server's CPU
    procfs.raise_nofile(8192 + s.scale_sessions)
    with tempfile.TemporaryDirectory(prefix="openenv-bench-") as tmp:
        workdir = Path(tmp)
        max_sessions = max(300, max(s.sizes or [0]) + 44)
        log("capturing our server's replies for the bare echo ...")
        templates = targets.capture_templates(workdir, max_sessions)
        template_path = workdir / "templates.json"
        template_path.write_text(json.dumps(templates))
        chosen, skipped = targets.make_targets(s.targets, templates=template_path, max_sessions=max_sessions,
                                               upstream_python=upstream_python)
        for key, why in skipped.items():
            log(f"skipped {key}: {why}")
        rounds: list[dict[str, Any]] = []
        for r in range(s.runs):
            order = chosen[r % len(chosen):] + chosen[:r % len(chosen)] if chosen else []
            log(f"round {r + 1}/{s.runs}: {', '.join(t.key for t in order)}")
            rounds.append({t.key: _measure(s, t, templates, workdir, plan, log) for t in order})
    return {"settings": asdict(s), "pinning": plan, "skipped": skipped, "rounds": rounds,
            "templates": {"ws_step_counter": templates["ws"]["counter"],
                          "http_step_counter": templates["http"]["counter"]}}


def run_scale(s: Settings, log: Any) -> dict[str, Any]:
    """The scale test: ``scale_sessions`` sessions of our sync echo held for ``scale_hold_s``."""
    plan = procfs.pinning_plan() if s.pin else {"server": None, "load": None}
    procfs.pin(plan["load"])
    procfs.raise_nofile(8192 + s.scale_sessions)
    n = s.scale_sessions
    with tempfile.TemporaryDirectory(prefix="openenv-bench-scale-") as tmp:
        workdir = Path(tmp)
        target = targets.make_targets(["ours-sync"], templates=workdir / "unused", max_sessions=n + 64,
                                      upstream_python=None)[0][0]
        log(f"scale: {n} sessions of {target.label}, held {s.scale_hold_s:.0f} s ...")
        try:
            run = targets.start(target, workdir, plan["server"])
        except Exception as exc:
            return {"failed": f"start: {exc}", "sessions": n}
        try:
            time.sleep(s.settle_s)
            idle = run.idle_sample()
            phase: dict[str, Any] = {
                "kind": "scale", "name": "scale", "sessions": n, "hold_s": s.scale_hold_s,
                "interval_s": s.scale_interval_s, "setup_timeout_s": 120,
                "drain_s": 15, "limit_s": 120 + s.scale_hold_s + 60,
            }
            cfg = {"host": targets.HOST, "port": run.port, "server_pid": run.pid, "ws_path": "/ws",
                   "offer_deflate": s.offer_deflate, "reset_frame": targets.RESET_FRAME,
                   "step_frame": targets.STEP_FRAME, "close_frame": targets.CLOSE_FRAME,
                   "http_step_body": targets.HTTP_STEP_BODY, "cpus": plan["load"], "nofile": n + 1024,
                   "phases": [phase]}
            result = _run_loadgen(cfg, workdir, phase["limit_s"] + 30)
            if not run.alive():
                result["crashed"] = run.log_tail()
        finally:
            run.stop()
    out = result.get("phases", [result])[0]
    out.update(idle=idle, server=target.label, max_sessions=n + 64, pinning=plan)
    log(f"scale: {'OK' if out.get('ok') else 'NOT OK'} — opened {out.get('opened')}/{n}, "
        f"errors {out.get('errors')}, rejected {out.get('rejected')}, dropped {out.get('dropped')}")
    return out
