"""Server memory under concurrent large WebSocket messages (issue 21, item 1).

``python -m bench.wsmemory [--quick]`` serves the echo env with ``openenv serve`` (a subprocess on
127.0.0.1) and has ``--clients`` clients each send one large ``step`` at once (``--mb`` MB of text,
echoed back), then reads the server's peak resident set (``VmHWM``). Three servers, same run:

* the reference: a body budget far above what is sent (``--max-body-budget-mb 1000000``), which is
  what the server did before WebSocket messages counted against the budget;
* the default budget (256 MiB);
* a 64 MiB budget.

Every step must be answered (a row says how many were); numbers are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

__all__ = ["main"]

_MIB = 1024 * 1024


def _hwm(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def _serve(budget_mb: float, max_mb: float) -> tuple[subprocess.Popen[bytes], int]:
    ready = Path(tempfile.mkdtemp(prefix="oe-wsmem-")) / "ready.json"
    proc = subprocess.Popen(
        [sys.executable, "-m", "openenv", "serve", "echo", "--port", "0", "--ready-file", str(ready),
         "--transport", "ws", "--log-level", "error", "--max-body-budget-mb", str(budget_mb),
         "--max-message-mb", str(max_mb)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while not ready.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise SystemExit("openenv serve echo did not get ready")
        time.sleep(0.05)
    return proc, int(json.loads(ready.read_text())["port"])


def _one(port: int, payload: str, out: list[bool]) -> None:
    from websockets.sync.client import connect

    try:
        with connect(f"ws://127.0.0.1:{port}/ws", open_timeout=30, proxy=None, max_size=None) as ws:
            ws.send('{"type":"reset","data":{}}')
            ws.recv(timeout=60)
            ws.send(payload)
            out.append(ws.recv(timeout=300)[:40].startswith('{"type":"observation"'))
    except Exception:
        out.append(False)


def _measure(budget_mb: float, clients: int, mb: int) -> tuple[float, int]:
    """(peak RSS growth in MiB, steps answered)."""
    proc, port = _serve(budget_mb, max(2 * mb, 100))
    try:
        before = _hwm(proc.pid)
        payload = json.dumps({"type": "step", "data": {"message": "x" * (mb * 1000 * 1000)}})
        answered: list[bool] = []
        threads = [threading.Thread(target=_one, args=(port, payload, answered)) for _ in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(600)
        return (_hwm(proc.pid) - before) / _MIB, sum(answered)
    finally:
        proc.kill()
        proc.wait()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.wsmemory", description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller messages (CI)")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--mb", type=int, default=None, help="MB per message (default 50; 20 with --quick)")
    args = ap.parse_args(argv)
    mb = args.mb or (20 if args.quick else 50)
    rows = [("reference: no budget on WebSocket messages", 1_000_000.0), ("default budget (256 MiB)", 256.0),
            ("--max-body-budget-mb 64", 64.0)]
    print(f"{args.clients} clients x one {mb} MB echo step at once; load average "
          f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print(f"{'server':<46}{'peak RSS growth MiB':>21}{'answered':>10}{'vs reference':>14}")
    reference = None
    for name, budget in rows:
        grown, answered = _measure(budget, args.clients, mb)
        reference = reference or grown
        print(f"{name:<46}{grown:>21.0f}{answered:>7}/{args.clients:<2}{grown / reference:>13.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
