"""``HarnessProcess``: one long-lived harness program with line-based stdio (upstream's RFC 005 name).

Built on ``subprocess.Popen`` and reader threads, not asyncio subprocesses, so the same process
can be used from any event loop (the sync facades of an env run their own loop per call, a server
runs one for everything). Reads never block a loop: lines are polled from a queue filled by the
reader threads.

Bounded by construction: a stdout line longer than ``max_line_bytes`` is cut there (the rest of
it is dropped), and only the last ``STDERR_TAIL_LINES`` stderr lines are kept, each cut to
``STDERR_LINE_CHARS``. The program runs in its own process group, and ``stop`` signals the whole
group (SIGTERM, then SIGKILL after the grace), so helpers it spawned die with it.
"""

from __future__ import annotations

import asyncio
import os
import queue
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import IO

from .adapter import HarnessNotRunningError, HarnessStartupError

__all__ = ["STDERR_TAIL_LINES", "HarnessProcess"]

#: How many stderr lines are kept for diagnostics, and how long each may be.
STDERR_TAIL_LINES, STDERR_LINE_CHARS = 50, 2000
_EOF = object()
#: After the program exits, how long output still in its pipe is waited for.
_EXIT_DRAIN_S = 0.2


class HarnessProcess:
    """A harness program: ``start``, ``write_line``, ``read_line``, ``stop`` (idempotent)."""

    def __init__(self, command: list[str], cwd: str, env_vars: dict[str, str] | None = None,
                 startup_timeout_s: float = 30.0, terminate_grace_s: float = 5.0, *,
                 max_line_bytes: int = 1 << 20, inherit_env: bool = True) -> None:
        self.command = list(command)
        self.cwd = cwd
        self.env_vars = dict(env_vars or {})
        self.startup_timeout_s = startup_timeout_s
        self.terminate_grace_s = terminate_grace_s
        self.max_line_bytes = max_line_bytes
        self.inherit_env = inherit_env
        self._proc: subprocess.Popen[bytes] | None = None
        self._lines: queue.Queue[object] = queue.Queue()
        self._stderr: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        self._readers: list[threading.Thread] = []

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def drain_stderr(self) -> str:
        """The last stderr lines (at most ``STDERR_TAIL_LINES``), for error messages."""
        return "".join(self._stderr)

    async def start(self, ready_check: Callable[[str], bool] | None = None) -> None:
        """Spawn the program; with ``ready_check``, wait (``startup_timeout_s``) for a stdout line it
        accepts. ``HarnessStartupError`` if it cannot be spawned, exits or is not ready in time."""
        if self.is_running():
            raise HarnessStartupError("harness process is already running")
        env = {**os.environ, **self.env_vars} if self.inherit_env else dict(self.env_vars)
        try:
            # Off the loop: spawning forks and execs, which may take a while on a loaded machine.
            self._proc = await asyncio.to_thread(
                subprocess.Popen, self.command, cwd=self.cwd, env=env, stdin=subprocess.PIPE,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            self._proc = None
            raise HarnessStartupError(f"failed to spawn harness process {self.command!r}: {exc}") from exc
        self._lines = queue.Queue()
        self._stderr = deque(maxlen=STDERR_TAIL_LINES)
        self._readers = [self._reader(self._proc.stdout, self._stdout_line, "stdout"),
                         self._reader(self._proc.stderr, self._stderr_line, "stderr")]
        if ready_check is None:
            return
        deadline = time.monotonic() + self.startup_timeout_s
        while True:
            line = await self.read_line(timeout_s=max(deadline - time.monotonic(), 0.0))
            if line is not None and ready_check(line):
                return
            if line is None:
                code = self._proc.poll() if self._proc is not None else None
                await self.stop()
                what = (f"exited with code {code} during startup" if code is not None
                        else f"did not become ready within {self.startup_timeout_s}s")
                raise HarnessStartupError(f"harness {what}; stderr tail:\n{self.drain_stderr()}")

    async def write_line(self, text: str) -> None:
        """Write one line to the program's stdin; ``HarnessNotRunningError`` if it is gone."""
        proc = self._proc
        if proc is None or proc.poll() is not None or proc.stdin is None:
            raise HarnessNotRunningError("cannot write to harness process: it is not running")
        data = (text if text.endswith("\n") else text + "\n").encode()
        stdin = proc.stdin

        def write() -> None:
            try:
                stdin.write(data)
                stdin.flush()
            except (BrokenPipeError, ValueError, OSError) as exc:
                raise HarnessNotRunningError(f"harness process stdin is closed: {exc}") from exc

        await asyncio.to_thread(write)

    async def read_line(self, timeout_s: float | None = None) -> str | None:
        """The next stdout line (without its newline); ``None`` at end of output (or once the program
        has exited and its last lines were read), or after ``timeout_s``."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        pause = 0.001
        exited_at: float | None = None
        while True:
            try:
                item = self._lines.get_nowait()
            except queue.Empty:
                now = time.monotonic()
                if deadline is not None and now >= deadline:
                    return None
                # A helper the program left behind may hold its stdout open: once the program itself
                # has exited and what it wrote has been read, that is the end of its output.
                if self._proc is None or self._proc.poll() is not None:
                    exited_at = exited_at or now
                    if now - exited_at >= _EXIT_DRAIN_S:
                        return None
                await asyncio.sleep(pause)  # polled: no thread is left waiting if the caller is cancelled
                pause = min(pause * 2, 0.02)
                continue
            if item is _EOF:
                self._lines.put(_EOF)  # every later read sees the end too
                return None
            assert isinstance(item, str)
            return item

    async def stop(self) -> None:
        """Stop the program's whole process group (SIGTERM, SIGKILL after the grace) and its readers."""
        proc = self._proc
        if proc is None:
            return
        await asyncio.to_thread(self._stop, proc)

    def stop_now(self) -> None:
        """``stop`` for code without an event loop."""
        if self._proc is not None:
            self._stop(self._proc)

    def _stop(self, proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is None:
            _signal_group(proc, signal.SIGTERM)
            try:
                proc.wait(timeout=self.terminate_grace_s)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait()
        # The leader is gone; helpers it left in its group must not outlive the session.
        _signal_group(proc, signal.SIGKILL, leader_too=False)
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        for thread in self._readers:
            thread.join(timeout=2.0)
        self._readers = []

    def _stdout_line(self, raw: bytes) -> None:
        self._lines.put(raw.decode("utf-8", "replace").rstrip("\r\n"))

    def _stderr_line(self, raw: bytes) -> None:
        self._stderr.append(raw[:STDERR_LINE_CHARS].decode("utf-8", "replace"))

    def _reader(self, stream: IO[bytes] | None, sink: Callable[[bytes], None], name: str) -> threading.Thread:
        limit = self.max_line_bytes

        def pump() -> None:
            try:
                while stream is not None:
                    line = stream.readline(limit)
                    if not line:
                        break
                    if len(line) >= limit and not line.endswith(b"\n"):
                        while (rest := stream.readline(limit)) and not rest.endswith(b"\n"):
                            pass  # the overlong line's tail is dropped, not held
                    sink(line)
            except (ValueError, OSError):  # the pipe was closed by stop()
                pass
            finally:
                if name == "stdout":
                    self._lines.put(_EOF)

        thread = threading.Thread(target=pump, daemon=True, name=f"openenv-harness-{name}")
        thread.start()
        return thread


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals, *, leader_too: bool = True) -> None:
    try:
        os.killpg(proc.pid, sig)  # start_new_session: the group id is the leader's pid
    except (ProcessLookupError, PermissionError):
        if leader_too:
            try:
                proc.send_signal(sig)
            except ProcessLookupError:
                pass
