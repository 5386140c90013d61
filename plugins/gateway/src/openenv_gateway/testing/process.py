"""Start the test model server (or any ``READY <url>``-printing server) as a subprocess, bounded in time."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from types import TracebackType

__all__ = ["ServerProcess", "model_server"]


class ServerProcess:
    """A child process that prints ``READY <base url>`` on stdout; ``stop()`` ends it by its PID."""

    def __init__(self, argv: list[str], *, ready_timeout_s: float = 120.0, env: dict[str, str] | None = None) -> None:
        self.argv, self.ready_timeout_s = argv, ready_timeout_s
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None
        self.base_url = ""

    def start(self) -> str:
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env,
                                     start_new_session=True)
        assert self.proc.stdout is not None and self.proc.stderr is not None
        deadline = time.monotonic() + self.ready_timeout_s
        selector = selectors.DefaultSelector()
        selector.register(self.proc.stdout, selectors.EVENT_READ)
        line = b""
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode(errors="replace")[-2000:]
                raise RuntimeError(f"{self.argv[:4]} exited ({self.proc.returncode}) before it was ready: {err}")
            if selector.select(timeout=0.2):
                line = self.proc.stdout.readline()
                if line.startswith(b"READY "):
                    self.base_url = line.split()[1].decode()
                    return self.base_url
        self.stop()
        raise TimeoutError(f"{self.argv[:4]} printed no READY line within {self.ready_timeout_s:g}s (last: {line!r})")

    def kill(self) -> None:
        """SIGKILL, as a crashed server would go (a test of mid-stream disconnects)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.kill()

    def __enter__(self) -> ServerProcess:
        self.start()
        return self

    def __exit__(self, *exc: tuple[type[BaseException] | None, BaseException | None, TracebackType | None]) -> None:
        self.stop()


def model_server(*args: str, ready_timeout_s: float = 180.0) -> ServerProcess:
    """The tiny-model server of ``openenv_gateway.testing.model_server`` with ``args`` (not started)."""
    return ServerProcess([sys.executable, "-m", "openenv_gateway.testing.model_server", "--port", "0", *args],
                         ready_timeout_s=ready_timeout_s)
