"""A throw-away Ray head on 127.0.0.1 for tests and the benchmark: ``with LocalRayHead() as head:``.

Drivers join it with ``head.environment()`` in their environment (``RAY_ADDRESS`` and a token of
its own for Ray's token authentication).

It runs ``ray start --head`` with a private temp dir, no dashboard and no usage stats, and with
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` so that every Ray process listens on 127.0.0.1 only
(``listening_wide()`` checks that with ``ss``). ``ray start`` daemonizes, so its processes are found
by the private temp dir in their command line and ended by PID; ``ray stop`` is never used (it
would stop every Ray cluster of this user on the machine).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

from openenv.testing import free_port

__all__ = ["LocalRayHead", "free_port", "listening_wide", "ray_environment"]


def ray_environment(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment that keeps a Ray cluster on loopback and quiet."""
    env = dict(os.environ if base is None else base)
    env.update(RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_USAGE_STATS_ENABLED="0")
    return env


def _ray_cli() -> str:
    found = Path(sys.executable).with_name("ray")
    return str(found) if found.exists() else (shutil.which("ray") or "ray")


class LocalRayHead:
    """``ray start --head`` on 127.0.0.1 with ``num_cpus`` CPUs; stopped by PID on exit."""

    def __init__(self, num_cpus: int = 2, start_timeout_s: float = 120.0, attempts: int = 3) -> None:
        self.num_cpus = num_cpus
        self.start_timeout_s = start_timeout_s
        self.attempts = attempts
        self.port = 0
        self.temp_dir = ""
        #: Ray's token auth, with a token of this cluster's own (not the user's ~/.ray/auth_token).
        self.token = secrets.token_hex(32)

    def environment(self) -> dict[str, str]:
        """What a driver of this cluster needs in its environment (loopback, quiet, the token)."""
        return dict(ray_environment({}), RAY_AUTH_MODE="token", RAY_AUTH_TOKEN=self.token,
                    RAY_ADDRESS=self.address)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> LocalRayHead:
        # `ray start` gives its raylet a fixed 30 s to register with the GCS; on a machine under
        # heavy load that can fail, so a failed start is cleaned up and tried again (bounded).
        failures = []
        for _ in range(self.attempts):
            error = self._start_once()
            if error is None:
                return self
            failures.append(error)
        raise RuntimeError(f"`ray start --head` failed {self.attempts} times; last:\n{failures[-1]}")

    def _start_once(self) -> str | None:
        """One ``ray start --head``; ``None`` on success, else its output (the cluster stopped)."""
        self.port = free_port()
        # Short: Ray puts unix sockets under it (a path may not exceed ~107 bytes).
        self.temp_dir = tempfile.mkdtemp(prefix="oeray-", dir="/tmp")
        argv = [_ray_cli(), "start", "--head", "--node-ip-address=127.0.0.1", f"--port={self.port}",
                "--include-dashboard=false", "--disable-usage-stats", f"--num-cpus={self.num_cpus}",
                f"--temp-dir={self.temp_dir}"]
        try:
            done = subprocess.run(argv, env={**os.environ, **self.environment()}, capture_output=True,
                                  text=True, timeout=self.start_timeout_s, check=False)
        except subprocess.TimeoutExpired:
            self.stop()
            return f"timed out after {self.start_timeout_s:g}s"
        if done.returncode != 0:
            self.stop()
            return f"exit code {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        return None

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()

    def pids(self) -> list[int]:
        """Processes of this cluster: those whose command line names its temp dir, and their children
        (workers rename themselves ``ray::...``, so they are found through their parent, the raylet)."""
        if not self.temp_dir:
            return []
        marker = self.temp_dir.encode()
        roots: set[int] = set()
        parent: dict[int, int] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            pid = int(entry)
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as f:
                    if marker in f.read():
                        roots.add(pid)
                with open(f"/proc/{entry}/stat", "rb") as f:
                    parent[pid] = int(f.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
        found = set(roots)
        grew = True
        while grew:
            children = {pid for pid, ppid in parent.items() if ppid in found} - found
            grew = bool(children)
            found |= children
        return sorted(found)

    def stop(self, grace_s: float = 5.0) -> None:
        """SIGTERM every process of this cluster, SIGKILL what is left after ``grace_s``."""
        for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 2.0)):
            pids = self.pids()
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except (ProcessLookupError, PermissionError):
                    pass
            deadline = time.monotonic() + wait
            while self.pids() and time.monotonic() < deadline:
                time.sleep(0.1)
        if self.temp_dir:
            shutil.rmtree(self.temp_dir, ignore_errors=True)


def listening_wide(pids: list[int]) -> list[str]:
    """``ss -ltnp`` lines of listening sockets of ``pids`` bound to something other than loopback."""
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=False).stdout
    wanted = {f"pid={pid}," for pid in pids}
    wide = []
    for line in out.splitlines():
        if not any(w in line for w in wanted):
            continue
        local = line.split()[3]
        if not local.startswith(("127.", "[::1]", "[::ffff:127.")):
            wide.append(line)
    return wide
