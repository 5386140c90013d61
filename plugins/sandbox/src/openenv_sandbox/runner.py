"""The sandbox runner: executes untrusted Python code or commands outside the server process.

``Sandbox.run_python(code)`` / ``Sandbox.run_command(cmd)`` return an ``ExecResult``. Each execution
gets a slot (one unprivileged uid per concurrent slot, so ``RLIMIT_NPROC`` counts only that
execution), a fresh empty working directory (removed afterwards) unless the caller passes a
persistent one, a minimal environment and the limits in ``Limits``. Executions are forked from a
warm zygote (see ``_child``) when it is available, else each starts a fresh interpreter.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from openenv_sandbox import _child, trees
from openenv_sandbox.boundary import Facts, describe, parse_self_check, self_check_code
from openenv_sandbox.host import (
    SAFE_PATH,
    can_drop_privileges,
    find_interpreter,
    make_undumpable,
    network_namespace_support,
    processes_of,
    syscall_filter_support,
)
from openenv_sandbox.limits import TRUNCATION_MARKER, ExecResult, Limits
from openenv_sandbox.syscall_filter import build_filter, unsupported
from openenv_sandbox.uids import lease_uids
from openenv_sandbox.zygote import CHILD_SOURCE, _Zygote

__all__ = ["DEFAULT_UID_BASE", "Sandbox"]

#: First uid of the slots (slot ``i`` runs as ``DEFAULT_UID_BASE + i``, gid likewise).
DEFAULT_UID_BASE = 61000
#: A grading execution in slot ``i`` runs as ``uid_base + GRADER_UID_OFFSET + i``: never a uid any
#: agent command runs as (``openenv_sandbox.grading``).
GRADER_UID_OFFSET = 2000
_KILL_GRACE_S = 5.0
_DRAIN_S = 1.0


def _sweep(uid: int | None) -> None:
    """Kill every process of ``uid`` (fallback runs; the zygote sweeps its own), until none is
    left (at most 20 passes; see ``_child.sweep``)."""
    if uid is None or uid == os.getuid() or uid == 0:  # never the server's own uid
        return
    for _ in range(20):
        subprocess.run(["/bin/kill", "-KILL", "-1"], user=uid, group=uid, extra_groups=[], env={"PATH": SAFE_PATH},
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10, check=False)
        if not processes_of(range(uid, uid + 1)):
            return


def _remove_stale_roots(parent: str | None) -> None:
    """Remove the roots of sandboxes whose process is gone (killed before ``close`` ran): their
    working directories and session trees would otherwise stay behind."""
    base = Path(parent or tempfile.gettempdir())
    for path in base.glob("openenv-sandbox-*-*"):
        owner = path.name.split("-")[2]
        if not owner.isdigit() or int(owner) == os.getpid() or Path(f"/proc/{owner}").exists():
            continue
        try:
            if path.is_dir() and path.stat().st_uid == os.geteuid():
                trees.remove(path)
        except OSError:
            pass


class Sandbox:
    """Runs untrusted code with limits, a dropped uid, no network and a throw-away directory.

    Thread-safe: up to ``slots`` executions run at once, further ones wait for a free slot.
    ``syscall_filter`` installs the seccomp filter of ``syscall_filter`` (the module) in every
    execution where the kernel allows it (it needs no privilege). Where privileges cannot be
    dropped, the server process is made non-dumpable (``host.make_undumpable``) so that executions,
    which then share its uid, cannot read its memory or environment.
    """

    def __init__(self, limits: Limits | None = None, *, slots: int = 64, uid_base: int = DEFAULT_UID_BASE,
                 pool: bool = True, spares: int = 2, isolate_network: bool = True,
                 require_network_isolation: bool = False, syscall_filter: bool = True,
                 python: str | None = None, root: str | None = None) -> None:
        if slots < 1:
            raise ValueError(f"slots must be at least 1, got {slots}")
        self.limits = limits or Limits()
        self.python = find_interpreter(python)
        self._drop = can_drop_privileges(uid_base)
        self._drop_graders = self._drop and can_drop_privileges(uid_base + GRADER_UID_OFFSET)
        # The uids are machine-wide: this sandbox holds a block of them no other on this host uses
        # (openenv_sandbox.uids); it may start above uid_base when another sandbox holds that one.
        self._lease = lease_uids(uid_base, slots, grader_offset=GRADER_UID_OFFSET if self._drop_graders else None) \
            if self._drop else None
        self._uids: list[int | None] = list(self._lease.agents) if self._lease else [None] * slots
        graders = self._lease.graders if self._lease else None
        self._grader_uids: list[int | None] = list(graders) if graders is not None else list(self._uids)
        self._free = list(range(slots))[::-1]  # slot 0 first
        self._slots = threading.Condition()
        self._isolate = isolate_network
        self._require_net = require_network_isolation
        self._net_problem = network_namespace_support() if isolate_network else "disabled by configuration"
        if require_network_isolation and self._net_problem:
            raise RuntimeError(f"network isolation was required but {self._net_problem}; run on a host that "
                               "allows network namespaces or pass require_network_isolation=False.")
        program = build_filter() if syscall_filter else None
        self._filter_problem = ("disabled by configuration" if not syscall_filter else unsupported()
                                or syscall_filter_support(self.python, program or b""))
        self._filter = program.hex() if program is not None and self._filter_problem is None else None
        # Executions share our uid: without this they could read our memory and /proc environ.
        self._undumpable = not self._drop and make_undumpable()
        _remove_stale_roots(root)
        self.root = Path(tempfile.mkdtemp(prefix=f"openenv-sandbox-{os.getpid()}-", dir=root))
        self.root.chmod(0o711)  # slots may reach their own directory, never list the others
        self._pool_wanted = pool
        self._spares = max(int(spares), 0)
        self._zygote: _Zygote | None = None
        self._zygote_lock = threading.Lock()
        self._pool_problem: str | None = None if pool else "disabled by configuration"
        self._closed = False
        self._observed: dict[str, Any] | None = None
        self._observed_lock = threading.Lock()

    # -- public ---------------------------------------------------------------------------------

    def run_python(self, code: str, *, limits: Limits | None = None, workdir: str | os.PathLike[str] | None = None,
                   files: Mapping[str, str] | None = None, env: Mapping[str, str] | None = None) -> ExecResult:
        """Run Python source in a fresh ``__main__`` namespace."""
        return self._execute({"code": code, "argv": None}, limits, workdir, files, env)

    def run_command(self, command: str | Sequence[str], *, limits: Limits | None = None,
                    workdir: str | os.PathLike[str] | None = None, files: Mapping[str, str] | None = None,
                    env: Mapping[str, str] | None = None) -> ExecResult:
        """Run a shell command line (``/bin/sh -c``) or an argv."""
        argv = ["/bin/sh", "-c", command] if isinstance(command, str) else [str(a) for a in command]
        if not argv:
            raise ValueError("run_command needs a command line or a non-empty argv")
        return self._execute({"code": None, "argv": argv}, limits, workdir, files, env)

    def make_tree(self, prefix: str = "tree-") -> Path:
        """A persistent working tree inside the sandbox root (for multi-step sessions). Remove it
        with ``remove_tree``."""
        path = Path(tempfile.mkdtemp(prefix=prefix, dir=self.root))
        path.chmod(0o700)
        return path

    def remove_tree(self, path: str | os.PathLike[str]) -> None:
        trees.remove(path)

    @property
    def boundary(self) -> dict[str, Any]:
        """The isolation this sandbox applies on this host, in words (for ``/metadata``; see
        ``openenv_sandbox.boundary``). The first call runs the self-check execution."""
        return describe(Facts(uids=tuple(u for u in self._uids if u is not None), net_problem=self._net_problem,
                              filter_problem=self._filter_problem, pool_problem=self._pool_problem,
                              undumpable=self._undumpable, limits=self.limits, python=self.python,
                              observed=self.self_check()))

    @property
    def uids(self) -> range | None:
        """The uids this sandbox's slots run as (leased for its life: no other sandbox on this host
        uses them), or None where executions keep the server's uid (not root)."""
        return self._lease.agents if self._lease else None

    @property
    def grader_uids(self) -> range | None:
        """The uids its grading executions run as (``openenv_sandbox.grading``), or None where they
        run as the slot's own uid."""
        return self._lease.graders if self._lease else None

    def self_check(self) -> dict[str, Any]:
        """What one execution could do here that a contained one must not (``boundary.SELF_CHECK``).
        Its findings are remembered once it succeeds; a failed run (a busy host can time it out) is
        reported as ``{"error": ...}`` and run again on the next call."""
        with self._observed_lock:
            if self._observed is not None:
                return self._observed
            if self._closed:
                return {"error": "the sandbox is closed"}
            try:
                result = self.run_python(self_check_code(), limits=Limits(wall_time_s=20.0, cpu_time_s=10))
                found = parse_self_check(result.stdout, result.exit_code, result.stderr)
            except (OSError, RuntimeError) as exc:
                found = {"error": f"the boundary self-check could not run: {exc}"}
            if "error" not in found:
                self._observed = found
            return found

    def close(self) -> None:
        """Stop the zygote (killing anything it still runs) and remove the sandbox root."""
        self._closed = True
        with self._zygote_lock:
            if self._zygote is not None:
                self._zygote.close()
                self._zygote = None
        trees.remove(self.root)
        if self._lease is not None:
            self._lease.close()  # nothing runs as its uids any more: the zygote killed what it ran

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ------------------------------------------------------------------------------

    def _acquire(self) -> tuple[int, int | None]:
        with self._slots:
            while not self._free:
                self._slots.wait()
            index = self._free.pop()
            return index, self._uids[index]

    def _release(self, index: int, uid: int | None) -> None:
        with self._slots:
            self._free.append(index)
            self._slots.notify()

    def _pool(self) -> _Zygote | None:
        if not self._pool_wanted or self._closed:
            return None
        with self._zygote_lock:
            if self._zygote is not None and not self._zygote.alive:
                self._zygote = None  # it died: start another
            if self._zygote is None:
                try:
                    self._zygote = _Zygote(self.python, self._spares, self._isolate)
                    self._pool_problem = None
                except OSError as exc:
                    self._pool_problem = f"could not start the zygote: {exc}"
                    return None
            return self._zygote

    def _execute(self, payload: dict[str, Any], limits: Limits | None, workdir: str | os.PathLike[str] | None,
                 files: Mapping[str, str] | None, env: Mapping[str, str] | None,
                 verdict: bytearray | None = None) -> ExecResult:
        """One execution. ``verdict``: a grading execution (``grading.grade_copy``): it runs as the
        slot's grader uid with a private ``/tmp``, and what it writes to its verdict pipe (the
        descriptor ``payload["verdict_fd"]``) is appended to ``verdict``."""
        if self._closed:
            raise RuntimeError("this Sandbox is closed; create a new one")
        limits = limits or self.limits
        index, uid = self._acquire()
        if verdict is not None:
            uid = self._grader_uids[index]
        own = workdir is None
        wd = Path(tempfile.mkdtemp(prefix="run-", dir=self.root)) if own else Path(workdir)  # type: ignore[arg-type]
        try:
            for name, text in (files or {}).items():
                target = (wd / name).resolve()
                if wd.resolve() not in target.parents:
                    raise ValueError(f"file {name!r} would land outside the working directory")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text, encoding="utf-8")
            wd.chmod(0o700)  # other slots (other sessions) may not read it; before the chown: we own it now
            if uid is not None:
                trees.hand_over(wd, uid)
            run_env = {"PATH": SAFE_PATH, "HOME": str(wd), "TMPDIR": str(wd), "LANG": "C.UTF-8",
                       "PYTHONDONTWRITEBYTECODE": "1", "PYTHONIOENCODING": "utf-8", **(env or {})}
            request = {**payload, "uid": uid, "workdir": str(wd), "env": run_env, "limits": limits.rlimits(),
                       "isolate_network": self._isolate, "require_network_isolation": self._require_net,
                       "syscall_filter": self._filter, "private_tmp": verdict is not None}
            return self._launch_and_collect(request, limits, uid, verdict)
        finally:
            if own:
                trees.remove(wd)
            elif uid is not None and wd.exists():
                # Between executions a persistent tree belongs to root (0700): the next session
                # to run in this slot's uid must not reach it.
                trees.reclaim(wd)
            self._release(index, uid)

    def _launch_and_collect(self, request: dict[str, Any], limits: Limits, uid: int | None,
                            verdict: bytearray | None = None) -> ExecResult:
        req_fd = os.memfd_create("openenv-sandbox-request")
        os.write(req_fd, json.dumps(request).encode())
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        ver_r, ver_w = os.pipe() if verdict is not None else (None, None)
        extra = [ver_w] if ver_w is not None else []
        report, report_child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        start = time.monotonic()
        zygote = self._pool()
        proc: subprocess.Popen[bytes] | None = None
        runner = "zygote"
        try:
            if zygote is not None:
                try:
                    zygote.launch([req_fd, out_w, err_w, report_child.fileno(), *extra])
                except OSError as exc:
                    self._pool_problem = f"the zygote stopped answering: {exc}"
                    zygote = None
            if zygote is None:
                runner = "fresh interpreter"
                proc = subprocess.Popen(
                    [self.python, "-I", "-c", CHILD_SOURCE, "once", str(req_fd), str(report_child.fileno()),
                     *map(str, extra)],
                    pass_fds=[req_fd, report_child.fileno(), *extra], stdin=subprocess.DEVNULL, stdout=out_w,
                    stderr=err_w, env={"PATH": SAFE_PATH, "LANG": "C.UTF-8"}, start_new_session=True)
        except BaseException:
            report.close()
            for fd in (out_r, err_r, ver_r):
                if fd is not None:
                    os.close(fd)
            raise
        finally:
            for fd in (req_fd, out_w, err_w, *extra):
                os.close(fd)
            report_child.close()
        collector = _Collector(report, out_r, err_r, proc, uid, limits, start, runner, ver_r)
        result = collector.collect()
        if verdict is not None and ver_r is not None:
            verdict += collector.buffers[ver_r] if not collector.truncated[ver_r] else b"\0 truncated"
        return result


class _Collector:
    """Reads one execution's output (bounded), enforces its wall time, and builds the result."""

    def __init__(self, report: socket.socket, out_r: int, err_r: int, proc: subprocess.Popen[bytes] | None,
                 uid: int | None, limits: Limits, start: float, runner: str, ver_r: int | None = None) -> None:
        self.report, self.proc, self.uid, self.limits, self.start = report, proc, uid, limits, start
        self.streams = [out_r, err_r] + ([ver_r] if ver_r is not None else [])
        self.buffers = {fd: bytearray() for fd in self.streams}
        self.truncated = dict.fromkeys(self.streams, False)
        self.out_r, self.err_r = out_r, err_r
        self.info: dict[str, Any] = {"runner": runner}
        self.pid: int | None = proc.pid if proc is not None else None
        self.status: int | None = None  # a raw wait status
        self.sel = selectors.DefaultSelector()

    def _read(self, fd: int) -> None:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            chunk = b""
        buf = self.buffers[fd]
        if chunk:
            room = self.limits.output_bytes - len(buf)
            buf += chunk[: max(room, 0)]
            if len(chunk) <= room:
                return
            self.truncated[fd] = True  # stop reading: further writes fail with EPIPE / SIGPIPE
        self.sel.unregister(fd)
        os.close(fd)

    def _on_report(self) -> bool:
        """Handle a report message; True once the execution has ended."""
        try:
            data = self.report.recv(65536)
        except OSError:
            data = b""
        if not data:
            self.sel.unregister(self.report)
            return self.proc is None  # the zygote died: the run cannot be observed further
        msg = json.loads(data)
        if "started" in msg:
            self.pid = msg["started"]
        elif "exit" in msg:
            self.status = msg["exit"]
            return True
        else:
            self.info.update(msg)
        return False

    def _kill(self) -> None:
        if self.proc is None:
            try:
                self.report.send(b"kill")
            except OSError:
                pass
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        _sweep(self.uid)

    def collect(self) -> ExecResult:
        for fd in self.streams:
            self.sel.register(fd, selectors.EVENT_READ)
        self.sel.register(self.report, selectors.EVENT_READ)
        pidfd = os.pidfd_open(self.proc.pid) if self.proc is not None else None
        if pidfd is not None:
            self.sel.register(pidfd, selectors.EVENT_READ)
        deadline = self.start + self.limits.wall_time_s
        timed_out = ended = False
        try:
            while not ended:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    if timed_out:  # the kill went unanswered
                        break
                    timed_out = True
                    self._kill()
                    deadline = time.monotonic() + _KILL_GRACE_S
                    continue
                for key, _ in self.sel.select(remaining):
                    if key.fileobj is self.report:
                        ended = self._on_report() or ended
                    elif key.fd == pidfd:
                        assert self.proc is not None
                        self.proc.wait()
                        _sweep(self.uid)
                        self.status = _as_wait_status(self.proc.returncode)
                        self.sel.unregister(pidfd)
                        ended = True
                    else:
                        self._read(key.fd)
            if self.status is None:  # lost (the zygote died) or the kill went unanswered: sweep here
                _sweep(self.uid)
            # Everything of the slot's uid is dead now, so the pipes reach EOF promptly.
            drain_until = time.monotonic() + _DRAIN_S
            while any(fd in self.sel.get_map() for fd in self.streams):
                remaining = drain_until - time.monotonic()
                if remaining <= 0:
                    break
                for key, _ in self.sel.select(remaining):
                    if key.fd in self.buffers:
                        self._read(key.fd)
                    elif key.fileobj is self.report:
                        self._on_report()
        finally:
            for fd in self.streams:
                if fd in self.sel.get_map():
                    self.sel.unregister(fd)
                    os.close(fd)
            self.sel.close()
            self.report.close()
            if pidfd is not None:
                os.close(pidfd)
        return self._result(timed_out, time.monotonic() - self.start)

    def _text(self, fd: int) -> str:
        text = bytes(self.buffers[fd]).decode("utf-8", errors="replace")
        return text + TRUNCATION_MARKER.format(cap=self.limits.output_bytes) if self.truncated[fd] else text

    def _result(self, timed_out: bool, duration: float) -> ExecResult:
        exit_code: int | None = None
        sig: int | None = None
        if self.status is not None:
            if os.WIFSIGNALED(self.status):
                sig = os.WTERMSIG(self.status)
                exit_code = -sig
            else:
                exit_code = os.waitstatus_to_exitcode(self.status)
        killed_by: str | None = None
        if timed_out:
            killed_by = "wall_time"
        elif sig == signal.SIGXCPU:
            killed_by = "cpu_time"
        elif sig == signal.SIGXFSZ:
            killed_by = "file_size"
        elif sig == signal.SIGPIPE and any(self.truncated.values()):
            killed_by = "output_limit"
        elif sig is not None:
            killed_by = signal.Signals(sig).name
        elif self.status is None:  # the zygote died under it: the execution was lost
            killed_by = "sandbox_lost"
        if exit_code == _child.SETUP_FAILED and "network" not in self.info:
            self.info["setup_failed"] = True
        return ExecResult(exit_code=exit_code, stdout=self._text(self.out_r), stderr=self._text(self.err_r),
                          timed_out=timed_out, killed_by=killed_by, duration_s=round(duration, 6),
                          stdout_truncated=self.truncated[self.out_r], stderr_truncated=self.truncated[self.err_r],
                          limits=self.limits.to_dict(), boundary=dict(self.info))


def _as_wait_status(returncode: int) -> int:
    """Popen's return code back to a raw wait status."""
    if returncode < 0:
        return -returncode
    return (returncode & 0xFF) << 8
