"""Helpers of the compatibility-layer tests: real servers on 127.0.0.1 with free ports.

* ``serving(app)`` runs an ASGI app with uvicorn in a background thread of this process;
* ``start_process(argv, cwd, env)`` starts a server subprocess (``openenv serve`` or ``uvicorn``)
  and returns once it accepts connections, with its base URL.

Every wait is bounded; a server that does not come up fails the test with its log.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
ECHO_DIR = FIXTURES / "upstream_style_echo"
MCP_ECHO_DIR = FIXTURES / "upstream_style_mcp_echo"
GUESS_DIR = FIXTURES / "upstream_style_guess"


def wait_for(predicate: Callable[[], Any], timeout_s: float = 20.0, interval_s: float = 0.02) -> Any:
    """Poll ``predicate`` until truthy (returned) or ``timeout_s`` passes (``None``)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval_s)
    return predicate() or None


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """Serve ``app`` on 127.0.0.1 (a free port) from a thread; yield ``http://127.0.0.1:<port>``."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="layer-uvicorn", daemon=True)
    thread.start()
    try:
        if not wait_for(lambda: server.started or not thread.is_alive(), timeout_s=20) or not server.started:
            pytest.fail("the in-process server did not start")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()
        assert not thread.is_alive(), "the in-process server did not stop"


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
                                start_new_session=True)

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
