"""Helpers of the compatibility-layer tests: real servers on 127.0.0.1 with free ports.

* ``serving(app)`` runs an ASGI app with the kit's ``LiveServer`` in a background thread;
* ``start_process(argv, cwd, env)`` starts a server subprocess (``openenv serve`` or ``uvicorn``)
  and returns once it accepts connections, with its base URL.

Every wait is bounded; a server that does not come up fails the test with its log.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from openenv.testing import LiveServer, restore_default_signals, wait_until

FIXTURES = Path(__file__).parent / "fixtures"
ECHO_DIR = FIXTURES / "upstream_style_echo"
MCP_ECHO_DIR = FIXTURES / "upstream_style_mcp_echo"
GUESS_DIR = FIXTURES / "upstream_style_guess"


#: The kit's bounded poll (``openenv.testing.wait_until``) under this suite's old name.
wait_for = wait_until


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """Serve ``app`` on 127.0.0.1 (a free port) from a thread (the kit's ``LiveServer``); yield
    ``http://127.0.0.1:<port>``."""
    with LiveServer(app, thread_name="layer-uvicorn") as server:
        yield server.url


@dataclass
class ServerProcess:
    proc: subprocess.Popen[str]
    url: str
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                return self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        return self.proc.wait(timeout=20)


def start_process(argv: list[str], *, cwd: Path, env: dict[str, str], log: Path,
                  ready_file: Path | None = None) -> ServerProcess:
    """Start a server subprocess; learn its port from ``ready_file`` or from uvicorn's log line."""
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, text=True,
                                start_new_session=True, preexec_fn=restore_default_signals)

    def port() -> int | None:
        if proc.poll() is not None:
            return -1
        if ready_file is not None:
            if ready_file.exists():
                try:
                    return int(json.loads(ready_file.read_text())["port"])
                except (ValueError, KeyError):
                    return None
            return None
        found = re.search(r"running on http://127\.0\.0\.1:(\d+)", log.read_text(errors="replace"))
        return int(found.group(1)) if found else None

    got = wait_for(port, timeout_s=60, interval_s=0.05)
    if not got or got == -1:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=20)
        pytest.fail(f"server {argv} did not start:\n{log.read_text(errors='replace')}")
    return ServerProcess(proc, f"http://127.0.0.1:{got}", log)


def openenv_serve(target: str, *args: str, cwd: Path, env: dict[str, str], tmp_path: Path) -> ServerProcess:
    """``python -m openenv serve <target> --port 0 ...`` with a ready file."""
    ready = tmp_path / f"ready-{time.monotonic_ns()}.json"
    argv = [sys.executable, "-m", "openenv", "serve", target, *args, "--port", "0", "--ready-file", str(ready),
            "--log-level", "warning"]
    return start_process(argv, cwd=cwd, env=env, log=tmp_path / f"serve-{time.monotonic_ns()}.log",
                         ready_file=ready)
