"""Process plumbing of the compat suite: start, wait for and stop our server and upstream's.

Upstream ``openenv==0.10.0`` is imported as ``openenv`` too, so it lives in a venv of its own
(``OPENENV_UPSTREAM_PYTHON``, set by ``nox -s compat``); everything upstream runs as a subprocess
of that interpreter, with the files under ``upstream_side/``.

Servers are real processes on 127.0.0.1 with OS-chosen ports, each in its own process group and
always stopped by PID (SIGTERM, then SIGKILL). Importing upstream costs seconds (it pulls in
gradio), so ``conftest.py`` launches every server the session needs at once and awaits them
together.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openenv.testing import wait_until

HOST = "127.0.0.1"
UPSTREAM_SIDE = Path(__file__).parent / "upstream_side"
UPSTREAM_ENV_VAR = "OPENENV_UPSTREAM_PYTHON"
#: Bearer token of the ``ours_token`` server (a test value, not a secret).
TOKEN = "compat-test-token"
#: Upper bound for a server to write its ready file (upstream's import alone takes ~6 s).
READY_TIMEOUT_S = 90.0


def upstream_env() -> dict[str, str]:
    """Environment for upstream subprocesses: nothing of ours may leak onto their import path."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "VIRTUAL_ENV", "OPENENV_"))}
    env["PYTHONUNBUFFERED"] = "1"
    return env


@dataclass
class ServerProcess:
    """A server subprocess (its own process group) and what its ready file said."""

    name: str
    proc: subprocess.Popen[bytes]
    ready_file: Path
    log_file: Path
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def url(self, app: str | None = None) -> str:
        """``http://127.0.0.1:<port>``; ``app`` picks one app of a multi-app upstream server."""
        port = self.info["ports"][app] if app is not None else self.info["port"]
        return f"http://{HOST}:{port}"

    def log(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> dict[str, Any]:
        wait_until(lambda: self.ready_file.exists() or self.proc.poll() is not None, timeout_s=timeout_s,
                   interval_s=0.05)
        if self.ready_file.exists():
            self.info = json.loads(self.ready_file.read_text())
            return self.info
        if self.proc.poll() is not None:
            raise RuntimeError(
                f"{self.name} server exited with {self.proc.returncode} before it was ready:\n"
                f"{self.log()}"
            )
        self.stop()
        raise RuntimeError(f"{self.name} server not ready after {timeout_s} s:\n{self.log()}")

    def kill(self, sig: int = signal.SIGKILL) -> None:
        """Send ``sig`` to the server's process group (only processes this fixture started)."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass

    def stop(self, grace_s: float = 5.0) -> None:
        """SIGTERM the group, SIGKILL it after ``grace_s``; always reaps the child. Idempotent."""
        if self.proc.poll() is None:
            self.kill(signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self.kill(signal.SIGKILL)
        try:
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL cannot be ignored
            pass
        # a SIGKILLed leader may leave children in its group
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _spawn(name: str, argv: list[str], workdir: Path, env: dict[str, str] | None) -> ServerProcess:
    workdir.mkdir(parents=True, exist_ok=True)
    ready = workdir / f"{name}.ready.json"
    ready.unlink(missing_ok=True)
    log = workdir / f"{name}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [*argv, "--ready-file", str(ready)],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            cwd=workdir, env=env, start_new_session=True,
        )
    return ServerProcess(name=name, proc=proc, ready_file=ready, log_file=log)


def spawn_ours(name: str, workdir: Path, max_sessions: int, token: str | None = None) -> ServerProcess:
    """Our echo server through the CLI, exactly as an operator would start it.

    The token (if any) goes through ``OPENENV_TOKEN``, as our docs recommend; an ambient
    ``OPENENV_TOKEN``/``OPENENV_MODE`` of the caller never reaches the server.
    """
    argv = [sys.executable, "-m", "openenv", "serve", "echo", "--host", HOST, "--port", "0",
            "--max-sessions", str(max_sessions), "--log-level", "warning"]
    env = {k: v for k, v in os.environ.items() if k not in ("OPENENV_TOKEN", "OPENENV_MODE")}
    env["OPENENV_DIE_WITH_PARENT"] = "1"  # never outlive a crashed pytest
    if token is not None:
        env["OPENENV_TOKEN"] = token
    return _spawn(name, argv, workdir, env)


def spawn_upstream(name: str, workdir: Path, python: str, apps: list[str]) -> ServerProcess:
    """Upstream's ``create_app`` serving ``upstream_side/echo_env.py``; ``apps`` = ``NAME:MAX[:PORT]``."""
    argv = [python, str(UPSTREAM_SIDE / "serve_upstream.py"), "--die-with-parent"]
    for app in apps:
        argv += ["--app", app]
    return _spawn(name, argv, workdir, upstream_env())


@dataclass
class Servers:
    """Every server of the session.

    ``ours`` (4 slots), ``ours_single`` (1 slot) and ``ours_token`` (2 slots, bearer token
    ``TOKEN``) run our echo env; ``upstream`` serves two apps
    of upstream's server, ``main`` (4 slots) and ``single`` (1 slot); ``victim`` is an upstream
    server that one test kills.
    """

    ours: ServerProcess
    ours_single: ServerProcess
    ours_token: ServerProcess
    upstream: ServerProcess
    victim: ServerProcess
    workdir: Path
