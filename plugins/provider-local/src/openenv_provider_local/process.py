"""Child processes that die with their parent and are always reaped, as whole process groups.

Promises:

* ``spawn`` starts the child as the leader of a new session and process group (so one signal to
  the group reaches everything it started, e.g. ``uv`` and the Python it runs) and, on Linux, with
  ``PR_SET_PDEATHSIG = SIGTERM`` so it is told to stop when its parent dies.
* ``kill_group`` is graceful first (SIGTERM), forced after a grace period (SIGKILL), and returns only
  once no live member of the group is left (zombies excepted: they hold no resources) or the time
  budget is spent.
* ``group_members`` / ``descendants`` list live processes of a group / under a process by
  scanning ``/proc`` (no psutil).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from queue import SimpleQueue
from typing import Any, BinaryIO

__all__ = ["ProcStat", "descendants", "group_members", "kill_group", "proc_stat", "spawn"]

_PR_SET_PDEATHSIG = 1


class ProcStat:
    """The fields of ``/proc/<pid>/stat`` we use."""

    __slots__ = ("pgid", "pid", "ppid", "start_ticks", "state")

    def __init__(self, pid: int, state: str, ppid: int, pgid: int, start_ticks: str) -> None:
        self.pid, self.state, self.ppid, self.pgid, self.start_ticks = pid, state, ppid, pgid, start_ticks

    @property
    def alive(self) -> bool:
        """Running or sleeping; a zombie (``Z``) or dead (``X``) entry holds nothing but a pid."""
        return self.state not in ("Z", "X")


def proc_stat(pid: int) -> ProcStat | None:
    """Parse ``/proc/<pid>/stat``; ``None`` if the process does not exist (or no procfs)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    # The command name may contain spaces and parentheses: split after the last ")".
    fields = text.rsplit(")", 1)[1].split()
    return ProcStat(pid, fields[0], int(fields[1]), int(fields[2]), fields[19])


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes whose process group is ``pgid``."""
    if not os.path.isdir("/proc"):
        # No procfs: ask the kernel whether the group still has any process at all.
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return []
        except PermissionError:
            return [pgid]
        return [pgid]
    members = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        st = proc_stat(int(name))
        if st is not None and st.pgid == pgid and st.alive:
            members.append(st.pid)
    return members


def descendants(root: int | None = None) -> list[int]:
    """Live (non-zombie) descendants of ``root`` (default: this process), from ``/proc``.

    Used by leak checks: after every server is stopped, none of them may remain.
    """
    root = os.getpid() if root is None else root
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = proc_stat(int(name))
            if st is not None and st.alive:
                children.setdefault(st.ppid, []).append(st.pid)
    found, stack = [], [root]
    while stack:
        for child in children.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def kill_group(
    pgid: int,
    *,
    grace_s: float = 10.0,
    popen: subprocess.Popen[bytes] | None = None,
    kill_wait_s: float = 5.0,
) -> bool:
    """Stop every process of group ``pgid``: SIGTERM, wait up to ``grace_s``, then SIGKILL.

    ``popen`` (the leader, if we started it) is reaped so no zombie is left. Returns True when the
    group is empty at the end.
    """
    _signal_group(pgid, signal.SIGTERM)
    if _wait_group_empty(pgid, grace_s, popen):
        return True
    _signal_group(pgid, signal.SIGKILL)
    return _wait_group_empty(pgid, kill_wait_s, popen)


def _wait_group_empty(pgid: int, timeout_s: float, popen: subprocess.Popen[bytes] | None) -> bool:
    deadline = time.monotonic() + max(timeout_s, 0.0)
    delay = 0.005
    while True:
        if popen is not None:
            popen.poll()  # reap the leader as soon as it exits
        if not group_members(pgid):
            if popen is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    popen.wait(timeout=1.0)
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


# -- spawning -------------------------------------------------------------------------------------


def _death_signal_preexec(parent_pid: int) -> Callable[[], None] | None:
    """A ``preexec_fn`` asking Linux to SIGTERM the child when its parent goes away."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        # The parent may have died between fork and prctl: then no signal will ever come.
        if os.getppid() != parent_pid:
            os._exit(1)

    return preexec


class _Spawner:
    """Runs every ``Popen`` on one long-lived thread.

    Linux delivers ``PR_SET_PDEATHSIG`` when the *thread* that forked the child exits, not the
    process. Callers often start servers from short-lived threads (``asyncio.to_thread``, a thread
    pool), which would kill the server as soon as that thread ends. Forking from a thread that lives
    as long as the process makes "dies with the parent" mean the parent process.
    """

    def __init__(self) -> None:
        self._queue: SimpleQueue[tuple[Callable[[], Any], Future[Any]]] = SimpleQueue()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def run(self, fn: Callable[[], Any]) -> Any:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="openenv-spawner", daemon=True)
                self._thread.start()
        fut: Future[Any] = Future()
        self._queue.put((fn, fut))
        return fut.result()

    def _loop(self) -> None:
        while True:
            fn, fut = self._queue.get()
            try:
                fut.set_result(fn())
            except BaseException as exc:
                fut.set_exception(exc)


_SPAWNER = _Spawner()


def spawn(
    argv: Sequence[str],
    *,
    env: dict[str, str],
    log: BinaryIO,
    cwd: str | None = None,
    die_with_parent: bool = True,
    pass_fds: Sequence[int] = (),
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in a new process group, output to ``log``; unless ``die_with_parent`` is
    False, the child is sent SIGTERM when this process exits. ``pass_fds`` stay open in the child
    (every other descriptor is closed)."""
    preexec = _death_signal_preexec(os.getpid()) if die_with_parent else None

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            env=env, cwd=cwd, start_new_session=True, close_fds=True, preexec_fn=preexec,
            pass_fds=tuple(pass_fds),
        )

    return _SPAWNER.run(start)  # type: ignore[no-any-return]
