"""Hardening benchmark (issue 21): a bystander's step latency next to stuck sessions, and /health
latency during a flood of idle connections.

``python -m bench.hardening [--quick]`` serves ``bench.hardening:MisbehavingEnv`` with
``openenv serve`` on 127.0.0.1 (a subprocess) and prints:

* bystander step p50/p99/p99.9 with no misbehaving session (quiet), and with ``--bad`` sessions
  whose steps hang (block in the env for the whole round) and ``--bad`` more that sleep 0.5 s per
  step (noisy) — goal: noisy p99 within 1.5x of quiet p99. Quiet and noisy rounds alternate
  (``--rounds`` of each, ``--seconds`` long: a round must span several sleeping steps, or the
  sleeping sessions do nothing while it is measured) so that a change in the machine's load during
  the run falls on both; the p99s are of all rounds' steps pooled, and each round's ratio is
  printed too (the spread);
* ``/health`` latency (p50/p99 over 20 requests) with ``--idle`` silent TCP connections held open.

The measuring client is the only thing in this process: one blocking socket, no thread
(``bench.clientwire``). The misbehaving sessions are driven by another process
(``bench.misbehave``), commanded round by round and ended by PID; a hung step is released at the
end of its round, so every quiet round runs beside no stuck call at all.

On a machine shared with other work the quiet p99 itself moves between runs by several times (the
OS scheduler, not the server: see docs/benchmarks.md, the hardening rows); compare the ratio over several runs.

Numbers are reported, never asserted (exit status 0 whenever something was measured).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench import clientwire, procfs
from bench.engine import is_observation
from bench.misbehave import SLEEP_S
from openenv.env import Environment
from openenv.types import Action, Observation, State

__all__ = ["MisbehavingEnv", "main"]

#: A hung step blocks at most this long (a bound, should the release never come).
_HANG_S = 3600.0
#: Most bystander steps in one round (a bound; a round normally ends on time first).
_MAX_ROUND_STEPS = 200_000
#: Seconds allowed for each reply the measuring client expects.
_REPLY_TIMEOUT_S = 30.0


class Say(Action):
    message: str = "ok"


class Said(Observation):
    echoed: str = ""


class MisbehavingEnv(Environment[Say, Said, State]):
    """A blocking env: ``hang`` blocks until a ``release`` step (at most an hour), ``sleep`` blocks
    for 0.5 s, anything else returns at once."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    #: Set by a ``release`` step, then replaced: the hung calls of one round wake, the next round's wait.
    _released = threading.Event()

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kw: Any) -> Said:
        return Said(echoed="ready")

    def step(self, action: Say, timeout_s: float | None = None, **kw: Any) -> Said:
        if action.message == "hang":
            MisbehavingEnv._released.wait(_HANG_S)
        elif action.message == "sleep":
            time.sleep(SLEEP_S)
        elif action.message == "release":
            released, MisbehavingEnv._released = MisbehavingEnv._released, threading.Event()
            released.set()
        return Said(echoed=action.message)

    @property
    def state(self) -> State:
        return State()


def _serve(root: Path, capacity: int, max_conn: int, extra: list[str]) -> tuple[subprocess.Popen[bytes], int]:
    ready = Path(tempfile.mkdtemp()) / "ready.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "openenv", "serve", "bench.hardening:MisbehavingEnv", "--port", "0",
         "--max-sessions", str(capacity), "--max-connections", str(max_conn), "--ready-file", str(ready),
         "--log-level", "error", "--transport", "ws", "--transport", "rest", *extra],
        cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=procfs.die_with_parent)
    deadline = time.monotonic() + 60
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            proc.wait()
            raise SystemExit("the server did not start")
        time.sleep(0.05)
    return proc, int(json.loads(ready.read_text())["port"])


def _steps(port: int, n: int, seconds: float | None = None) -> list[float]:
    """Closed-loop steps of one new session, ``n`` of them or (with ``seconds``) as many as fit in
    that time, at most ``n``: each step's round-trip time, in seconds."""
    st = clientwire.connect_ws("127.0.0.1", port, "/ws", offer_deflate=False, timeout_s=_REPLY_TIMEOUT_S)
    out = []
    try:
        clientwire.ws_roundtrip(st, clientwire.encode_frame(b'{"type":"reset","data":{}}', key=st.key),
                                _REPLY_TIMEOUT_S)
        frame = clientwire.encode_frame(b'{"type":"step","data":{"message":"ok"}}', key=st.key)
        clock = time.perf_counter
        end = clock() + seconds if seconds is not None else float("inf")
        for _ in range(n):
            t = clock()
            if t >= end:
                break
            reply = clientwire.ws_roundtrip(st, frame, _REPLY_TIMEOUT_S)
            out.append(clock() - t)
            if not is_observation(reply):
                raise SystemExit(f"the bystander's step failed: {reply[:200]!r}")
        st.sock.sendall(clientwire.encode_frame(clientwire.CLOSE_CODE_NORMAL, clientwire.OP_CLOSE, st.key))
    finally:
        st.sock.close()
    return out


class _Load:
    """The misbehaving sessions (``bench.misbehave``): a process of its own, commanded on stdin,
    ended by PID."""

    def __init__(self, root: Path, port: int, bad: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bench.misbehave", "--port", str(port), "--hang", str(bad),
             "--sleep", str(bad), "--seconds", "600"],
            cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE, preexec_fn=procfs.die_with_parent)
        self._out = b""

    def _command(self, command: str, answer: str) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(command.encode() + b"\n")
        self.proc.stdin.flush()
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + 2 * _REPLY_TIMEOUT_S  # the child bounds each of its waits
        while b"\n" not in self._out:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                raise SystemExit(f"bench.misbehave did not answer {command!r} in time")
            chunk = os.read(fd, 4096)
            if not chunk:
                raise SystemExit(f"bench.misbehave ended instead of answering {command!r}")
            self._out += chunk
        line, _, self._out = self._out.partition(b"\n")
        if line.strip() != answer.encode():
            raise SystemExit(f"bench.misbehave answered {line!r} to {command!r}")

    def start(self) -> None:
        """Open the hung and sleeping sessions."""
        self._command("start", "started")

    def stop(self) -> None:
        """Release the hung steps and close every misbehaving session."""
        self._command("stop", "stopped")

    def end(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()  # SIGTERM: a running round is stopped as by ``stop``
        try:
            self.proc.wait(timeout=2 * _REPLY_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


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


def _bystander(root: Path, port: int, rounds: int, seconds: float, bad: int) -> tuple[
        list[float], list[float], list[float]]:
    """Alternate quiet and noisy rounds: (quiet samples, noisy samples, per-round p99 ratios)."""
    quiet: list[float] = []
    noisy: list[float] = []
    ratios = []
    load = _Load(root, port, bad)
    try:
        for _ in range(rounds):
            q = _steps(port, _MAX_ROUND_STEPS, seconds)
            load.start()
            time.sleep(SLEEP_S)  # every hung call has entered the env, every sleeping one is stepping
            n = _steps(port, _MAX_ROUND_STEPS, seconds)
            load.stop()
            quiet += q
            noisy += n
            ratios.append(_pct(n, 0.99) / max(_pct(q, 0.99), 1e-9))
    finally:
        load.end()
    return quiet, noisy, ratios


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.hardening", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds and idle sockets (CI)")
    ap.add_argument("--seconds", type=float, default=1.0, help="length of each round (default 1 s: "
                    "two steps of every sleeping session)")
    ap.add_argument("--rounds", type=int, default=None, help="quiet and noisy rounds (each)")
    ap.add_argument("--bad", type=int, default=None, help="hanging sessions (and as many sleeping)")
    ap.add_argument("--idle", type=int, default=None, help="idle connections in the flood")
    ap.add_argument("--server-arg", action="append", default=[], help="extra `openenv serve` argument")
    args = ap.parse_args(argv)
    rounds = args.rounds or (3 if args.quick else 6)
    bad = args.bad or (4 if args.quick else 16)
    idle_n = args.idle or (200 if args.quick else 2000)
    root = Path(__file__).resolve().parent.parent
    load_at_start = os.getloadavg()[0]
    # Room for the bystander, the misbehaving sessions and the one releasing them.
    proc, port = _serve(root, max(128, 2 * bad + 8), max(64, idle_n // 4, 2 * bad + 8), args.server_arg)
    try:
        _steps(port, 500)  # warm-up
        quiet, noisy, ratios = _bystander(root, port, rounds, args.seconds, bad)
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
        (f"bystander step, quiet ({len(quiet)} steps)", quiet),
        (f"bystander step, {bad} hung + {bad} sleeping ({len(noisy)})", noisy),
        ("/health, quiet", health_quiet), (f"/health, {idle_n} idle connections", health_flood),
    ]
    print(f"load average at start: {load_at_start:.2f} on {os.cpu_count()} CPUs (a shared machine is noisy)")
    print(f"{'row':<48}{'p50 ms':>9}{'p99 ms':>9}{'p99.9 ms':>10}")
    for name, xs in rows:
        print(f"{name:<48}{statistics.median(xs) * 1000:>9.2f}{_pct(xs, 0.99):>9.2f}{_pct(xs, 0.999):>10.2f}")
    print(f"per-round p99 ratios noisy/quiet ({rounds} rounds of {args.seconds:g} s): "
          + ", ".join(f"{r:.2f}" for r in ratios))
    verdict = "met" if ratio <= 1.5 else "missed"
    print(f"bystander p99 ratio noisy/quiet: {ratio:.2f} (goal <= 1.5: {verdict})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
