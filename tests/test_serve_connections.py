"""Connections that never speak are shed by ``openenv serve`` (issue 21, item 4)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.usefixtures("no_leftover_processes")


@pytest.fixture
def serve_proc(cli_env: dict[str, str], tmp_path: Path, wait_until):  # type: ignore[no-untyped-def]
    procs: list[subprocess.Popen[str]] = []

    def start(*args: str) -> tuple[subprocess.Popen[str], int, Path]:
        ready, log_path = tmp_path / "ready.json", tmp_path / "serve.log"
        proc = subprocess.Popen(
            [sys.executable, "-m", "openenv", "serve", "echo", "--port", "0", "--ready-file", str(ready),
             "--log-level", "info", *args],
            stdout=open(log_path, "w"), stderr=subprocess.STDOUT, text=True, env=cli_env,  # noqa: SIM115
            start_new_session=True)
        procs.append(proc)
        info = wait_until(lambda: ready.exists() and json.loads(ready.read_text()), timeout_s=30)
        if not info:
            pytest.fail(f"server did not get ready: {log_path.read_text()}")
        return proc, int(info["port"]), log_path

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def closed_by_peer(sock: socket.socket) -> bool:
    sock.settimeout(0.01)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_silent_connections_are_shed_and_health_is_still_served(serve_proc, wait_until) -> None:  # type: ignore[no-untyped-def]
    proc, port, log_path = serve_proc("--max-connections", "40", "--header-timeout", "2")
    idle = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(200)]
    try:
        # 200 silent sockets against a cap of 40: a real client is still answered.
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=10).json() == {"status": "healthy"}
        assert wait_until(lambda: sum(closed_by_peer(s) for s in idle) >= 150, timeout_s=10)
        # The rest are closed by the header timeout.
        assert wait_until(lambda: all(closed_by_peer(s) for s in idle), timeout_s=15)
    finally:
        for s in idle:
            s.close()
    log = log_path.read_text()
    assert "shed a connection" in log and ("connection cap 40" in log or "no request headers" in log)
    assert proc.poll() is None


def test_a_slow_header_is_cut_off(serve_proc, wait_until) -> None:  # type: ignore[no-untyped-def]
    _, port, _ = serve_proc("--header-timeout", "1")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # never finishes its headers
        assert wait_until(lambda: closed_by_peer(sock), timeout_s=10)
