"""The code that runs in the sandbox's helper processes (stdlib only).

The runner never imports this module into the server: it reads this file's *source* and starts a
fresh interpreter with ``python -I -c <source> MODE ...`` (isolated mode: no site-packages, no
``PYTHON*`` variables, no script directory on ``sys.path``). Two modes:

* ``zygote CTRL_FD SPARES ISOLATE`` — the warm pool. It waits on a ``SOCK_SEQPACKET`` control
  socket for launch requests; each request carries four descriptors (request memfd, stdout,
  stderr, report socket). It keeps ``SPARES`` children forked in advance (each already in its own
  new network namespace when ``ISOLATE`` is 1, and still privileged, waiting for a request) and
  hands each request to one of them, forking directly when none is left; it refills the spares
  between requests. It reports ``started`` and later ``exit`` (the wait status) on the report
  socket, kills the child's process group *and every process of the child's uid* on ``kill`` or
  when the runner hangs up, and exits (killing everything) when the runner's control socket closes.
  A grading request carries a fifth descriptor, the verdict pipe (see below).
* ``once REQ_FD REPORT_FD [VERDICT_FD]`` — the fallback: this process itself becomes the sandboxed
  child.
* ``probe-filter PROGRAM_HEX`` — exits 0 when the seccomp filter installs and works here.

A child applies, in order: a new session (own process group), stdio onto the given pipes and
every other descriptor closed, default signal dispositions, a new network namespace
(``unshare(CLONE_NEWNET)``: only a loopback device, down), resource limits, ``setgroups([])`` +
``setgid`` + ``setuid`` to the slot's unprivileged uid, the fresh working directory, the
parent-death signal, ``no_new_privs``, a minimal environment and, last, the seccomp filter the
runner sent (``syscall_filter``); then it ``exec``s the argv or runs the Python code in a fresh
``__main__`` namespace. Whatever it could not apply it reports on the report socket first.

A grading request (``openenv_sandbox.grading``) also gets: a private ``/tmp`` (a new mount
namespace with a tmpfs there, when this process may mount: root with ``CAP_SYS_ADMIN``), and the
write end of a verdict pipe kept open, non-inheritable, at the descriptor number the request names
(``verdict_fd``), so that only the grading process itself, never a process it starts, can write it.
"""

from __future__ import annotations

import builtins
import ctypes
import gc
import io
import json
import os
import resource
import selectors
import signal
import socket
import sys
import traceback

CLONE_NEWNET = 0x40000000
CLONE_NEWNS = 0x00020000
MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 1 << 12, 1 << 14, 1 << 18  # mount(2) flags
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
#: Exit code of a child whose sandbox could not be set up (nothing of the payload ran).
SETUP_FAILED = 125

_libc = ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, value: int) -> None:
    _libc.prctl(option, value, 0, 0, 0)


def _unshare(flags: int) -> str | None:
    """``unshare(2)``; returns None on success, else the error text."""
    if _libc.unshare(flags) == 0:
        return None
    return os.strerror(ctypes.get_errno())


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def install_filter(program: bytes) -> str | None:
    """Install a seccomp-BPF ``program`` (``struct sock_filter`` array) on this process; needs
    ``PR_SET_NO_NEW_PRIVS`` first. Returns None on success, else the error text."""
    buffer = ctypes.create_string_buffer(program, len(program))
    prog = _SockFprog(len(program) // 8, ctypes.addressof(buffer))
    if _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) == 0:
        return None
    return os.strerror(ctypes.get_errno())


def private_tmp(workdir: str) -> str:
    """A new mount namespace with an empty tmpfs on ``/tmp`` (nothing propagates back), the
    working directory bound back at its own path when it was under ``/tmp``; the outcome in words."""
    error = _unshare(CLONE_NEWNS)
    if error is not None:
        return f"shared (no mount namespace: {error})"
    if _libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        return f"shared (could not make the mounts private: {os.strerror(ctypes.get_errno())})"
    held = os.open(workdir, os.O_PATH | os.O_DIRECTORY)
    try:
        if _libc.mount(b"tmpfs", b"/tmp", b"tmpfs", MS_NOSUID | MS_NODEV, b"size=64m,mode=1777") != 0:
            return f"shared (could not mount a tmpfs: {os.strerror(ctypes.get_errno())})"
        if not os.path.isdir(workdir):  # it was under /tmp: bind it back where it was
            os.makedirs(workdir, 0o755)
            if _libc.mount(f"/proc/self/fd/{held}".encode(), workdir.encode(), None, MS_BIND, None) != 0:
                raise OSError(ctypes.get_errno(), "could not bind the working directory into the private /tmp")
    finally:
        os.close(held)
    return "private (a fresh tmpfs)"


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    offset = 0
    while True:
        chunk = os.pread(fd, 1 << 20, offset)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        offset += len(chunk)


def _report(sock: socket.socket | None, **fields: object) -> None:
    if sock is None:
        return
    try:
        sock.send(json.dumps(fields).encode())
    except OSError:
        pass


def _tasks_of(uid: int, *, living: bool = False) -> int:
    """Tasks (threads included: what ``RLIMIT_NPROC`` counts) whose real uid is ``uid``; with
    ``living``, processes that are not zombies."""
    count = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
            if int(fields["Uid"].split()[0]) == uid:
                count += (not fields["State"].strip().startswith("Z")) if living else int(fields["Threads"])
        except (OSError, KeyError, ValueError):
            continue
    return count


def _set_limits(limits: dict[str, int], shared_uid: bool) -> None:
    cpu = int(limits["cpu_s"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_AS, (limits["memory_bytes"], limits["memory_bytes"]))
    # RLIMIT_NPROC counts every task of the real uid. Sharing the server's uid, the execution may
    # start ``processes`` more than that uid runs now (the server's threads would otherwise use up
    # the limit and no command could fork).
    processes = limits["processes"] + (_tasks_of(os.getuid()) if shared_uid else 0)
    resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))
    resource.setrlimit(resource.RLIMIT_NOFILE, (limits["open_files"], limits["open_files"]))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits["file_size_bytes"], limits["file_size_bytes"]))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def child_main(req_fd: int, out_fd: int, err_fd: int, report_fd: int, unshared: str | None = None,
               verdict_fd: int | None = None) -> None:
    """Become the sandboxed process and run the request. Never returns.

    ``unshared``: a pre-forked spare already called ``unshare(CLONE_NEWNET)``; this is its outcome
    (``"ok"`` or the error text), so it is not done again. ``verdict_fd``: a grading request's
    verdict pipe (moved to the descriptor ``req["verdict_fd"]``).
    """
    try:
        req = json.loads(_read_all(req_fd))
        report = socket.socket(fileno=report_fd)
        try:
            os.setsid()
        except OSError:  # already a session leader (the fallback starts us with a new session)
            pass
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_fd, 1)
        os.dup2(err_fd, 2)
        keep = {report.fileno()}
        if verdict_fd is not None:  # a grading request: its verdict pipe, at the number it names
            wanted = int(req["verdict_fd"])
            if wanted < 3 or wanted in keep:
                raise ValueError(f"verdict descriptor {wanted} is taken")
            if verdict_fd != wanted:
                os.dup2(verdict_fd, wanted, inheritable=False)
                os.close(verdict_fd)
            os.set_inheritable(wanted, False)
            keep.add(wanted)
        low = 3
        for fd in sorted(keep):
            os.closerange(low, fd)
            low = fd + 1
        os.closerange(low, 65536)
        for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        try:
            signal.set_wakeup_fd(-1)
        except ValueError:
            pass
        net = "host"
        if req["isolate_network"] or unshared is not None:
            error = _unshare(CLONE_NEWNET) if unshared is None else (None if unshared == "ok" else unshared)
            net = "none (new network namespace)" if error is None else f"host (unshare refused: {error})"
            if error is not None and req["require_network_isolation"]:
                _report(report, setup_error=f"network isolation required but {net}")
                os._exit(SETUP_FAILED)
        tmp = "shared"
        if req.get("private_tmp"):
            tmp = private_tmp(req["workdir"]) if os.geteuid() == 0 else "shared (mounting a tmpfs needs root)"
        _set_limits(req["limits"], shared_uid=req["uid"] is None)
        uid = req["uid"]
        if uid is not None:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
        # After the uid drop: the directory belongs to the slot's uid (0700), and a server holding
        # only CAP_SETUID/CAP_SETGID/CAP_CHOWN (no CAP_DAC_OVERRIDE) could not enter it as root.
        os.chdir(req["workdir"])
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        _prctl(PR_SET_NO_NEW_PRIVS, 1)  # setuid binaries cannot raise privileges again
        os.umask(0o022)
        env = {str(k): str(v) for k, v in req["env"].items()}
        syscalls = "off"
        if req.get("syscall_filter"):
            # Last: nothing of the set-up above may be refused by it.
            error = install_filter(bytes.fromhex(req["syscall_filter"]))
            if error is not None:
                os.write(2, f"sandbox setup failed: the seccomp filter could not be installed: {error}\n".encode())
                os._exit(SETUP_FAILED)
            syscalls = "seccomp filter"
        _report(report, network=net, uid=os.getuid(), gid=os.getgid(), pid=os.getpid(), syscalls=syscalls, tmp=tmp)
        report.close()
    except BaseException as exc:  # setup failed: nothing of the payload may run
        try:
            os.write(2, f"sandbox setup failed: {exc!r}\n".encode())
        finally:
            os._exit(SETUP_FAILED)
    if req["argv"] is not None:
        try:
            os.execvpe(req["argv"][0], req["argv"], env)
        except OSError as exc:
            os.write(2, f"{req['argv'][0]}: {exc.strerror}\n".encode())
            os._exit(127)
    _run_python(req["code"], env, req["workdir"])


def _run_python(code: str, env: dict[str, str], workdir: str) -> None:
    os.environ.clear()
    os.environ.update(env)
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="backslashreplace")
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace",
                                  line_buffering=True)
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
    sys.argv = ["-c"]
    sys.dont_write_bytecode = True
    sys.path[:] = [workdir, *(p for p in sys.path if p and os.path.isabs(p))]
    namespace = {"__name__": "__main__", "__builtins__": builtins, "__doc__": None}
    status = 0
    try:
        exec(compile(code, "<sandbox>", "exec"), namespace)
    except SystemExit as exc:
        if exc.code is None:
            status = 0
        elif isinstance(exc.code, int):
            status = exc.code & 0xFF
        else:
            print(exc.code, file=sys.stderr)
            status = 1
    except BaseException:
        traceback.print_exc()
        status = 1
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:
        status = status or 120
    os._exit(status)


# -- the zygote -------------------------------------------------------------------------------------


def sweep(uid: int | None) -> None:
    """Kill every process of ``uid``: a helper drops to it and calls ``kill(-1, SIGKILL)``.

    That reaches processes that left the process group (``setsid``) or were re-parented, so no
    sandboxed process survives its execution. Repeated until none is left (at most 50 passes): a
    fork racing a pass survives it on some kernels (gVisor's, measured).
    """
    if uid is None or uid == os.getuid() or uid == 0:
        return
    for _ in range(50):
        pid = os.fork()
        if pid == 0:
            try:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
                os.kill(-1, signal.SIGKILL)
                os.kill(-1, signal.SIGKILL)
            except BaseException:
                pass
            os._exit(0)
        os.waitpid(pid, 0)
        if not _tasks_of(uid, living=True):
            return


class _Run:
    __slots__ = ("exited", "pid", "report", "uid")

    def __init__(self, pid: int, uid: int | None, report: socket.socket) -> None:
        self.pid, self.uid, self.report, self.exited = pid, uid, report, False


def _leftover_uids(runs: dict[int, _Run]) -> set[int]:
    """Uids of processes that outlived their execution's leader.

    The zygote is a child subreaper, so a process that survives its leader (or its own parent) is
    re-parented to the zygote: every leftover is below a direct child that is not a running
    leader. Reading our children list is far cheaper than forking a sweeper after every run.
    """
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children") as f:
            children = [int(p) for p in f.read().split()]
    except OSError:  # no CONFIG_PROC_CHILDREN: sweep every uid we know of
        return _ALL_UIDS - {r.uid for r in runs.values() if r.uid is not None}
    uids: set[int] = set()
    for pid in children:
        if pid in runs:
            continue
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("Uid:"):
                        uids.add(int(line.split()[1]))
                        break
        except OSError:
            continue
    # Only slot uids are swept (never our own uid: without privilege dropping, executions run as
    # the server's uid, and kill(-1) from it would reach the server). A uid still in use belongs
    # to a running execution: its strays die when it ends.
    return (uids & _ALL_UIDS) - {r.uid for r in runs.values() if r.uid is not None}


#: Every slot uid seen so far (the fallback when the children list is unavailable).
_ALL_UIDS: set[int] = set()


def _kill(run: _Run) -> None:
    if not run.exited:
        try:
            os.killpg(run.pid, signal.SIGKILL)
        except OSError:
            pass
    sweep(run.uid)


#: Imported once in the zygote so that executions find them warm (forks share the pages).
WARM_MODULES = ("math", "re", "collections", "itertools", "functools", "random", "string", "typing",
                "dataclasses", "traceback", "unittest")


def _reap_all(deadline_s: float) -> None:
    """Wait for every child (and re-parented grandchild) so that none is left as a zombie."""
    def _expired(*_: object) -> None:
        raise TimeoutError

    signal.signal(signal.SIGALRM, _expired)
    signal.setitimer(signal.ITIMER_REAL, deadline_s)
    try:
        while True:
            os.waitpid(-1, 0)
    except (ChildProcessError, TimeoutError):
        pass
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _spare(ctrl: socket.socket, isolate: bool) -> tuple[int, socket.socket] | None:
    """Fork a spare child that does the request-independent work now (its network namespace)
    and then waits for a request's descriptors on its own socket."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        try:
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            ours.close()
            ctrl.close()
            unshared = None
            if isolate:
                error = _unshare(CLONE_NEWNET)
                unshared = "ok" if error is None else error
            _msg, fds, _flags, _addr = socket.recv_fds(theirs, 64, 5)
        except BaseException:
            os._exit(SETUP_FAILED)
        if len(fds) not in (4, 5):  # the zygote is closing its spares
            os._exit(0)
        child_main(fds[0], fds[1], fds[2], fds[3], unshared=unshared, verdict_fd=fds[4] if len(fds) == 5 else None)
    theirs.close()
    return pid, ours


def zygote(ctrl_fd: int, spares_wanted: int = 0, isolate: bool = False) -> None:
    for name in WARM_MODULES:
        __import__(name)
    # Everything imported so far lives for ever: keep the collector off those pages, so forked
    # children do not copy them on their first collection.
    gc.collect()
    gc.freeze()
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    if os.getuid() != 0:  # executions share our uid: they must not rewrite us or the spares (/proc/<pid>/mem)
        _prctl(PR_SET_DUMPABLE, 0)
    ctrl = socket.socket(fileno=ctrl_fd)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_r, False)
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    sel = selectors.DefaultSelector()
    sel.register(ctrl, selectors.EVENT_READ, "ctrl")
    sel.register(wake_r, selectors.EVENT_READ, "chld")
    runs: dict[int, _Run] = {}
    spares: list[tuple[int, socket.socket]] = []
    while True:
        while len(spares) < spares_wanted:  # refilled between requests, off their critical path
            spare = _spare(ctrl, isolate)
            if spare is None:
                break
            spares.append(spare)
        for key, _ in sel.select():
            if key.data == "ctrl":
                try:
                    msg, fds, _flags, _addr = socket.recv_fds(ctrl, 64, 5)
                except InterruptedError:
                    continue
                if not msg and not fds:  # the runner is gone: nothing may outlive it
                    for run in list(runs.values()):
                        _kill(run)
                    for spare_pid, spare_sock in spares:
                        spare_sock.close()
                        os.kill(spare_pid, signal.SIGKILL)
                    _reap_all(deadline_s=5.0)
                    os._exit(0)
                if len(fds) not in (4, 5):
                    for fd in fds:
                        os.close(fd)
                    continue
                req_fd, out_fd, err_fd, report_fd = fds[:4]
                verdict_fd = fds[4] if len(fds) == 5 else None
                pid = 0
                while spares and not pid:
                    spare_pid, spare_sock = spares.pop()
                    try:
                        socket.send_fds(spare_sock, [b"run"], fds)
                        pid = spare_pid
                    except OSError:  # that spare died: try the next, or fork
                        pass
                    spare_sock.close()
                if not pid:
                    pid = os.fork()
                    if pid == 0:
                        child_main(req_fd, out_fd, err_fd, report_fd, verdict_fd=verdict_fd)
                req = json.loads(_read_all(req_fd))
                for fd in (req_fd, out_fd, err_fd, *fds[4:]):
                    os.close(fd)
                report = socket.socket(fileno=report_fd)
                runs[pid] = _Run(pid, req["uid"], report)
                if req["uid"] is not None:
                    _ALL_UIDS.add(req["uid"])
                _report(report, started=pid)
                sel.register(report, selectors.EVENT_READ, pid)
            elif key.data == "chld":
                try:
                    while os.read(wake_r, 4096):
                        pass
                except BlockingIOError:
                    pass
                while True:
                    try:
                        pid, status = os.waitpid(-1, os.WNOHANG)
                    except ChildProcessError:
                        break
                    if pid == 0:
                        break
                    ended = runs.pop(pid, None)
                    if ended is None:  # a re-parented grandchild, or a sweeper
                        continue
                    ended.exited = True
                    for uid in _leftover_uids(runs):
                        sweep(uid)
                    _report(ended.report, exit=status)
                    if ended.report.fileno() in sel.get_map():
                        sel.unregister(ended.report)
                    ended.report.close()
            else:
                target = runs.get(key.data)
                if target is None:
                    continue
                try:
                    data = target.report.recv(64)
                except OSError:
                    data = b""
                if data.startswith(b"kill") or not data:
                    _kill(target)
                if not data:  # the runner hung up; the run's exit is still reaped above
                    sel.unregister(target.report)


def probe_filter(program_hex: str) -> None:
    """Exit 0 when the filter installs and refuses ``socket(AF_INET)`` but not ``socketpair``."""
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    error = install_filter(bytes.fromhex(program_hex))
    if error is not None:
        print(f"the seccomp filter could not be installed: {error}")
        sys.exit(2)
    try:
        socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
    except PermissionError:
        pass
    else:
        print("the seccomp filter was installed but did not refuse socket(AF_INET)")
        sys.exit(3)
    for end in socket.socketpair():
        end.close()
    sys.exit(0)


def main(argv: list[str]) -> None:
    if argv[1] == "probe-filter":
        probe_filter(argv[2])
    elif argv[1] == "zygote":
        zygote(int(argv[2]), int(argv[3]) if len(argv) > 3 else 0, len(argv) > 4 and argv[4] == "1")
    elif argv[1] == "once":
        child_main(int(argv[2]), 1, 2, int(argv[3]), verdict_fd=int(argv[4]) if len(argv) > 4 else None)
    else:
        raise SystemExit(f"unknown mode {argv[1]!r}")


if __name__ == "__main__":
    main(sys.argv)
