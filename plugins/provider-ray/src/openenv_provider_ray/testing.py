"""A throw-away Ray cluster on 127.0.0.1 for tests and the benchmark: ``with LocalRayHead() as head:``,
and ``head.add_worker()`` for a second node (a worker raylet started separately, joining the head).

Drivers join it with ``head.environment()`` in their environment (``RAY_ADDRESS`` and a token of
its own for Ray's token authentication).

It runs ``ray start --head`` with a private temp dir, no dashboard and no usage stats, and with
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` so that every Ray process listens on 127.0.0.1 only
(``listening_wide()`` checks that with ``ss``). ``ray start`` daemonizes, so its processes are found
by the private temp dir in their command line and ended by PID; ``ray stop`` is never used (it
would stop every Ray cluster of this user on the machine).

A worker node on the same machine: ``ray start --address`` refuses to start one unless
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER`` is on, and with it on Ray swaps every loopback address for the
machine's IP (the worker then looks for the GCS there and its processes listen on every interface).
``add_worker`` therefore runs Ray's CLI in a small wrapper (``_WORKER_CLI``) that lifts only that
refusal, in its own process, and keeps loopback addresses as given; the variable stays ``0`` for
every process the worker node starts, so they too listen on 127.0.0.1 only. The worker shares the
head's temp dir, so ``pids()``/``stop()`` cover both nodes.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType

from openenv.testing import free_port

__all__ = ["LocalRayHead", "free_port", "listening_wide", "ray_environment"]


def ray_environment(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment that keeps a Ray cluster on loopback and quiet."""
    env = dict(os.environ if base is None else base)
    env.update(RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER="0", RAY_USAGE_STATS_ENABLED="0")
    return env


#: ``ray start`` for a worker node on this machine, loopback kept (see the module docstring); the
#: CLI's arguments follow on the command line.
_WORKER_CLI = """
import sys
from ray._private import ray_constants, services
ray_constants.ENABLE_RAY_CLUSTER = True  # lifts only `ray start --address`'s same-machine refusal
_resolve = services.resolve_ip_for_localhost
services.resolve_ip_for_localhost = lambda host: host if services.is_localhost(host) else _resolve(host)
services.get_node_ip_address = lambda address=None: "127.0.0.1"
from ray.scripts.scripts import main
sys.argv = ["ray", *sys.argv[1:]]
main()
"""


def _ray_cli() -> str:
    found = Path(sys.executable).with_name("ray")
    return str(found) if found.exists() else (shutil.which("ray") or "ray")


class LocalRayHead:
    """``ray start --head`` on 127.0.0.1 with ``num_cpus`` CPUs; stopped by PID on exit."""

    def __init__(self, num_cpus: int = 2, start_timeout_s: float = 120.0, attempts: int = 3,
                 resources: Mapping[str, float] | None = None) -> None:
        self.num_cpus = num_cpus
        #: Custom Ray resources of the head node (e.g. a slot per node to place actors on each).
        self.resources = dict(resources or {})
        #: Worker nodes added with ``add_worker``, in order (their number of CPUs and resources).
        self.workers: list[dict[str, float]] = []
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
        if self.resources:
            argv.append(f"--resources={json.dumps(self.resources)}")
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

    def add_worker(self, num_cpus: int = 1, resources: Mapping[str, float] | None = None,
                   timeout_s: float | None = None) -> None:
        """Start a worker node on 127.0.0.1 that joins this head (a raylet of its own, started
        separately); returns once ``ray start`` reports it joined. ``RuntimeError`` if it does not
        within ``timeout_s`` (``start_timeout_s`` by default); the cluster is left as it was."""
        if not self.port:
            raise RuntimeError("Start the head first: `with LocalRayHead() as head: head.add_worker()`.")
        wait = self.start_timeout_s if timeout_s is None else timeout_s
        argv = [sys.executable, "-c", _WORKER_CLI, "start", f"--address={self.address}",
                "--node-ip-address=127.0.0.1", "--disable-usage-stats", f"--num-cpus={num_cpus}",
                f"--temp-dir={self.temp_dir}"]
        if resources:
            argv.append(f"--resources={json.dumps(dict(resources))}")
        env = {**os.environ, **self.environment()}
        env.pop("RAY_ADDRESS", None)  # the address is on the command line
        failure = ""
        for _ in range(self.attempts):  # its raylet has the same fixed 30 s to register (see __enter__)
            before = set(self.pids())
            try:
                done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=wait, check=False)
                if done.returncode == 0:
                    break
                failure = f"exit code {done.returncode}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
            except subprocess.TimeoutExpired:
                failure = f"timed out after {wait:g}s"
            # Only what appeared since: the worker node's processes (the head's are left alone).
            _end(lambda: set(self.pids()) - before, grace_s=5.0)  # noqa: B023 (called here, in this turn)
        else:
            raise RuntimeError(f"a worker node did not join the Ray head at {self.address} "
                               f"({self.attempts} tries); last: {failure}")
        self.workers.append({"num_cpus": float(num_cpus), **{k: float(v) for k, v in (resources or {}).items()}})

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
        _end(lambda: set(self.pids()), grace_s=grace_s)
        if self.temp_dir:
            shutil.rmtree(self.temp_dir, ignore_errors=True)


def _end(alive: Callable[[], set[int]], *, grace_s: float) -> None:
    """SIGTERM the processes ``alive()`` finds, SIGKILL those it still finds after ``grace_s``."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 2.0)):
        for pid in sorted(alive()):
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + wait
        while alive() and time.monotonic() < deadline:
            time.sleep(0.1)


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
