"""Hardening benchmark (issue 21): a bystander's step latency next to stuck sessions, and /health
latency during a flood of idle connections.

``python -m bench.hardening [--quick]`` serves ``bench.hardening:MisbehavingEnv`` with
``openenv serve`` on 127.0.0.1 (a subprocess) and prints:

* bystander step p50/p99 with no misbehaving session, then with ``--bad`` sessions whose steps hang
  (block for the whole run) and ``--bad`` more that sleep 0.5 s per step — goal: p99 within 1.5× of
  the quiet run;
* ``/health`` latency (p50/p99 over 20 requests) with ``--idle`` silent TCP connections held open.

Numbers are reported, never asserted (exit status 0 whenever something was measured).
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any

from openenv.env import Environment
from openenv.types import Action, Observation, State

__all__ = ["MisbehavingEnv", "main"]


class Say(Action):
    message: str = "ok"


class Said(Observation):
    echoed: str = ""


class MisbehavingEnv(Environment[Say, Said, State]):
    """A blocking env: ``hang`` blocks for an hour, ``sleep`` for 0.5 s, anything else returns."""

    SUPPORTS_CONCURRENT_SESSIONS = True

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kw: Any) -> Said:
        return Said(echoed="ready")

    def step(self, action: Say, timeout_s: float | None = None, **kw: Any) -> Said:
        if action.message == "hang":
            time.sleep(3600)
        elif action.message == "sleep":
            time.sleep(0.5)
        return Said(echoed=action.message)

    @property
    def state(self) -> State:
        return State()


def _serve(root: Path, max_conn: int) -> tuple[subprocess.Popen[bytes], int]:
    ready = Path(tempfile.mkdtemp()) / "ready.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "openenv", "serve", "bench.hardening:MisbehavingEnv", "--port", "0",
         "--max-sessions", "128", "--max-connections", str(max_conn), "--ready-file", str(ready),
         "--log-level", "error", "--transport", "ws", "--transport", "rest"],
        cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("the server did not start")
        time.sleep(0.05)
    return proc, int(json.loads(ready.read_text())["port"])


def _ws(port: int) -> Any:
    from websockets.sync.client import connect

    ws = connect(f"ws://127.0.0.1:{port}/ws", open_timeout=30, compression=None, proxy=None)
    ws.send('{"type":"reset","data":{}}')
    ws.recv(timeout=30)
    return ws


def _steps(port: int, n: int) -> list[float]:
    ws = _ws(port)
    out = []
    try:
        for _ in range(n):
            t = time.perf_counter()
            ws.send('{"type":"step","data":{"message":"ok"}}')
            ws.recv(timeout=30)
            out.append(time.perf_counter() - t)
    finally:
        ws.close()
    return out


def _misbehave(port: int, message: str, stop: threading.Event) -> None:
    ws = _ws(port)
    try:
        while not stop.is_set():
            ws.send(json.dumps({"type": "step", "data": {"message": message}}))
            if message == "hang":
                stop.wait()
                return
            ws.recv(timeout=30)
    except Exception:
        pass
    finally:
        ws.close()


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] * 1000


def _health(port: int, n: int = 20) -> list[float]:
    import httpx

    out = []
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as c:
        for _ in range(n):
            t = time.perf_counter()
            c.get("/health")
            out.append(time.perf_counter() - t)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.hardening", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer steps and idle sockets (CI)")
    ap.add_argument("--steps", type=int, default=None)
    ap.add_argument("--bad", type=int, default=None, help="hanging sessions (and as many sleeping)")
    ap.add_argument("--idle", type=int, default=None, help="idle connections in the flood")
    args = ap.parse_args(argv)
    warnings.filterwarnings("ignore", category=DeprecationWarning)  # websockets' sync connect() style
    steps = args.steps or (200 if args.quick else 2000)
    bad = args.bad or (4 if args.quick else 16)
    idle_n = args.idle or (200 if args.quick else 2000)
    root = Path(__file__).resolve().parent.parent
    proc, port = _serve(root, max_conn=max(64, idle_n // 4))
    try:
        _steps(port, 20)  # warm-up
        quiet = _steps(port, steps)
        stop = threading.Event()
        threads = [threading.Thread(target=_misbehave, args=(port, m, stop), daemon=True)
                   for m in ["hang"] * bad + ["sleep"] * bad]
        for t in threads:
            t.start()
        time.sleep(1.0)
        noisy = _steps(port, steps)
        stop.set()
        health_quiet = _health(port)
        socks = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(idle_n)]
        health_flood = _health(port)
        for s in socks:
            s.close()
    finally:
        proc.kill()
        proc.wait()
    ratio = _pct(noisy, 0.99) / max(_pct(quiet, 0.99), 1e-9)
    rows = [
        ("bystander step, quiet", quiet), (f"bystander step, {bad} hung + {bad} sleeping", noisy),
        ("/health, quiet", health_quiet), (f"/health, {idle_n} idle connections", health_flood),
    ]
    print(f"{'row':<44}{'p50 ms':>10}{'p99 ms':>10}")
    for name, xs in rows:
        print(f"{name:<44}{statistics.median(xs) * 1000:>10.2f}{_pct(xs, 0.99):>10.2f}")
    verdict = "met" if ratio <= 1.5 else "missed"
    print(f"bystander p99 ratio noisy/quiet: {ratio:.2f} (goal <= 1.5: {verdict})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
