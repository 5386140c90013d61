"""The worker processes of ``openenv serve --workers N`` (openenv_serve_uvicorn.workers): how
each is started (the front's own ``serve`` options, its share of ``--max-sessions``, its unix
socket, die-with-parent), noticed dead, restarted (bounded) and stopped."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["MAX_RESTARTS", "START_TIMEOUT_S", "NoWorker", "Supervisor", "Worker", "split_capacity", "worker_argv"]

log = logging.getLogger("openenv.server")

#: Restarts of one worker allowed within a minute; past it the worker stays down (the others serve).
MAX_RESTARTS = 5
#: Seconds a worker may take to start serving (building a sandboxed env can be slow).
START_TIMEOUT_S = 120.0
#: Options of the front that a worker must not get (each is replaced, or meaningless for a worker).
_FRONT_OPTIONS = {"--workers", "--port", "--host", "--ready-file", "--fd", "--uds", "--max-sessions", "--token"}
_FRONT_FLAGS = {"--allow-open"}


def split_capacity(total: int | None, n: int) -> list[int | None]:
    """Each worker's ``--max-sessions``: ``total`` split as evenly as it goes (``None``: each
    worker keeps its default). Raises ``ValueError`` when a worker would get no session."""
    if total is None:
        return [None] * n
    if total < n:
        raise ValueError(f"--max-sessions {total} with --workers {n}: each worker needs at least one "
                         f"session. Give --max-sessions {n} or more, or --workers {total}.")
    return [total // n + (1 if i < total % n else 0) for i in range(n)]


def worker_argv(serve_args: list[str]) -> list[str]:
    """``serve``'s own arguments without the front's options (``--port 8000``, ``--host=..``)."""
    out: list[str] = []
    skip = False
    for arg in serve_args:
        if skip:
            skip = False
            continue
        name = arg.split("=", 1)[0]
        if name in _FRONT_OPTIONS:
            skip = "=" not in arg
            continue
        if name in _FRONT_FLAGS:
            continue
        out.append(arg)
    return out


@dataclass
class Worker:
    """One worker process and what the front routed to it."""

    index: int
    uds: Path
    capacity: int | None
    proc: subprocess.Popen[bytes] | None = None
    generation: int = 0
    up: asyncio.Event = field(default_factory=asyncio.Event)
    connections: int = 0  # WebSocket connections spliced to it now
    sessions: set[str] = field(default_factory=set)  # HTTP/MCP sessions it created
    restarts: list[float] = field(default_factory=list)
    restarting: bool = False
    idle: list[tuple[float, asyncio.StreamReader, asyncio.StreamWriter]] = field(default_factory=list)

    @property
    def load(self) -> float:
        used = self.connections + len(self.sessions)
        return used / self.capacity if self.capacity else float(used)


class NoWorker(Exception):
    """No worker is serving (all are starting or were given up on)."""


class Supervisor:
    """The workers: started, watched and restarted, stopped. The front (a subclass) routes to them."""

    def __init__(self, serve_args: list[str], prefix: list[str], capacities: list[int | None], *,
                 token: str | None, sockdir: Path) -> None:
        self.args = worker_argv(serve_args)
        self.prefix = prefix
        self.token = token
        self.workers = [Worker(i, sockdir / f"w{i}.sock", cap) for i, cap in enumerate(capacities)]
        self.stopping = False


    def _spawn(self, w: Worker) -> None:
        from openenv.cli.serve_cmd import DIE_WITH_PARENT_ENV

        ready = w.uds.with_suffix(".ready")
        with contextlib.suppress(FileNotFoundError):
            ready.unlink()
        argv = [sys.executable, "-m", "openenv", *self.prefix, "serve", *self.args, "--uds", str(w.uds),
                "--ready-file", str(ready)]
        if w.capacity is not None:
            argv += ["--max-sessions", str(w.capacity)]
        env = {**os.environ, DIE_WITH_PARENT_ENV: "1"}
        if self.token:  # by environment, never on a command line other users can read
            env["OPENENV_TOKEN"] = self.token
        w.proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL)
        w.generation += 1

    async def _wait_ready(self, w: Worker) -> None:
        ready = w.uds.with_suffix(".ready")
        deadline = time.monotonic() + START_TIMEOUT_S
        while not ready.exists():
            assert w.proc is not None
            if w.proc.poll() is not None:
                raise RuntimeError(f"worker {w.index} exited with code {w.proc.returncode} while starting "
                                   "(its error is printed above)")
            if time.monotonic() > deadline:
                raise RuntimeError(f"worker {w.index} did not start serving within {START_TIMEOUT_S:.0f} s")
            await asyncio.sleep(0.05)
        w.up.set()

    async def start(self) -> None:
        """Start every worker and wait until all serve; raises ``RuntimeError`` if one cannot."""
        for w in self.workers:
            self._spawn(w)
        await asyncio.gather(*(self._wait_ready(w) for w in self.workers))

    async def supervise(self) -> None:
        """Notice dead workers, forget what lived on them, restart them (bounded)."""
        while not self.stopping:
            await asyncio.sleep(0.1)
            for w in self.workers:
                if self.stopping or w.proc is None or w.proc.poll() is None or w.restarting:
                    continue
                w.restarting = True
                self._lost(w)
                now = time.monotonic()
                w.restarts = [t for t in w.restarts if now - t < 60.0]
                if len(w.restarts) >= MAX_RESTARTS:
                    log.error("worker %d exited with code %s; it crashed %d times within a minute, so it stays "
                              "down and the other workers serve", w.index, w.proc.returncode, MAX_RESTARTS)
                    w.proc, w.restarting = None, False
                    continue
                log.warning("worker %d (pid %d) exited with code %s; its sessions are lost; restarting it",
                            w.index, w.proc.pid, w.proc.returncode)
                w.restarts.append(now)
                asyncio.get_running_loop().create_task(self._restart(w))

    def _lost(self, w: Worker) -> None:
        w.up.clear()
        for _, _, writer in w.idle:
            writer.close()
        w.idle.clear()
        w.sessions.clear()  # routes keep their generation: a later request learns the session is lost

    async def _restart(self, w: Worker) -> None:
        if self.stopping:
            return
        try:
            self._spawn(w)
            await self._wait_ready(w)
        except RuntimeError as exc:  # it exited again: the supervisor counts it as another crash
            log.error("%s", exc)
        finally:
            w.restarting = False

    def stop_workers(self, timeout_s: float = 10.0) -> None:
        """SIGTERM every worker, wait (bounded), SIGKILL what is left."""
        procs = [w.proc for w in self.workers if w.proc is not None and w.proc.poll() is None]
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                p.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for p in procs:
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(5)

    async def _died(self, w: Worker, gen: int) -> bool:
        """Whether ``w`` (generation ``gen``) died: the socket's EOF can come before its exit status."""
        for _ in range(20):
            if w.generation != gen or (w.proc is not None and w.proc.poll() is not None):
                return True
            await asyncio.sleep(0.025)
        return False
