"""What this host offers the sandbox: an interpreter others may run, privilege dropping, network
namespaces, and stronger boundaries around us (a container, gVisor's ``runsc``)."""

from __future__ import annotations

import functools
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["SAFE_PATH", "can_drop_privileges", "container_limits", "find_interpreter", "make_undumpable",
           "network_namespace_support", "outer_boundary", "processes_of", "same_uid_processes", "server_process",
           "syscall_filter_support", "under_gvisor", "world_accessible", "world_writable_dirs"]

#: ``PATH`` inside the sandbox: system directories only (never the server's venv or home).
SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"


def world_accessible(path: str | os.PathLike[str]) -> bool:
    """True when an unprivileged uid can execute ``path``: the file is world-readable and
    -executable and every directory above it is world-searchable."""
    try:
        real = Path(os.path.realpath(path))
        st = real.stat()
    except OSError:
        return False
    if not (st.st_mode & stat.S_IROTH and st.st_mode & stat.S_IXOTH):
        return False
    return all(parent.stat().st_mode & stat.S_IXOTH for parent in real.parents)


def _stdlib_accessible(python: str) -> bool:
    try:
        out = subprocess.run([python, "-I", "-c", "import os; print(os.__file__)"], capture_output=True,
                             text=True, timeout=10, env={"PATH": SAFE_PATH}, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return False
    return world_accessible(out) or (os.path.exists(out) and _readable_tree(Path(out).parent))


def _readable_tree(directory: Path) -> bool:
    try:
        return bool(directory.stat().st_mode & stat.S_IXOTH) and all(
            p.stat().st_mode & stat.S_IXOTH for p in directory.parents)
    except OSError:
        return False


@functools.cache
def find_interpreter(preferred: str | None = None) -> str:
    """A Python an unprivileged uid can run, with its standard library readable.

    The sandboxed code imports the standard library *after* dropping privileges, so the server's
    own interpreter only qualifies when it is world-accessible (a venv under ``/root`` is not).
    Otherwise a system ``python3`` on ``SAFE_PATH`` is used.
    """
    if preferred:
        candidates = [preferred]
    else:
        candidates = [getattr(sys, "_base_executable", sys.executable), sys.executable]
        candidates += [p for p in (shutil.which(n, path=SAFE_PATH) for n in ("python3", "python")) if p]
    needs_world = os.geteuid() == 0
    for candidate in candidates:
        if not candidate or not os.path.exists(candidate):
            continue
        if not needs_world or (world_accessible(candidate) and _stdlib_accessible(candidate)):
            return os.path.realpath(candidate)
    if preferred:
        raise RuntimeError(f"the sandbox interpreter {preferred!r} is not runnable by an unprivileged uid "
                           "(it and every directory above it must be world-readable/-searchable); pass "
                           "python=None to pick a system python3, or install one under /usr/bin.")
    raise RuntimeError("no Python interpreter runnable by an unprivileged uid was found on "
                       f"{SAFE_PATH}; install python3 there (e.g. apt-get install python3) or pass python=.")


@functools.cache
def can_drop_privileges(uid: int) -> bool:
    """True when we may switch to ``uid`` (root with ``CAP_SETUID``/``CAP_SETGID``)."""
    if os.geteuid() != 0:
        return False
    try:
        subprocess.run(["/bin/true"], user=uid, group=uid, extra_groups=[], check=True, timeout=10,
                       env={"PATH": SAFE_PATH})
    except (OSError, subprocess.SubprocessError):
        return False
    return True


@functools.cache
def network_namespace_support() -> str | None:
    """None when ``unshare(CLONE_NEWNET)`` works here, else the reason it does not."""
    if not sys.platform.startswith("linux"):
        return f"network namespaces are Linux-only (this is {sys.platform})"
    probe = ("import ctypes, os, sys\n"
             "libc = ctypes.CDLL(None, use_errno=True)\n"
             "sys.exit(0 if libc.unshare(0x40000000) == 0 else min(ctypes.get_errno(), 255) or 1)\n")
    try:
        code = subprocess.run([sys.executable, "-I", "-c", probe], timeout=10, env={"PATH": SAFE_PATH}).returncode
    except (OSError, subprocess.SubprocessError) as exc:
        return f"could not probe unshare(CLONE_NEWNET): {exc}"
    return None if code == 0 else f"unshare(CLONE_NEWNET) refused: {os.strerror(code)}"


#: Capability numbers (``linux/capability.h``) to names, for ``server_process``.
_CAPS = ("CHOWN", "DAC_OVERRIDE", "DAC_READ_SEARCH", "FOWNER", "FSETID", "KILL", "SETGID", "SETUID", "SETPCAP",
         "LINUX_IMMUTABLE", "NET_BIND_SERVICE", "NET_BROADCAST", "NET_ADMIN", "NET_RAW", "IPC_LOCK", "IPC_OWNER",
         "SYS_MODULE", "SYS_RAWIO", "SYS_CHROOT", "SYS_PTRACE", "SYS_PACCT", "SYS_ADMIN", "SYS_BOOT", "SYS_NICE",
         "SYS_RESOURCE", "SYS_TIME", "SYS_TTY_CONFIG", "MKNOD", "LEASE", "AUDIT_WRITE", "AUDIT_CONTROL", "SETFCAP",
         "MAC_OVERRIDE", "MAC_ADMIN", "SYSLOG", "WAKE_ALARM", "BLOCK_SUSPEND", "AUDIT_READ", "PERFMON", "BPF",
         "CHECKPOINT_RESTORE")
#: What gVisor's emulated kernel reports (``uname``); its kernel log starts with "Starting gVisor...".
_GVISOR_UNAME = ("4.4.0", "#1 SMP Sun Jan 10 15:06:54 PST 2016")


def server_process() -> dict[str, Any]:
    """This process as the kernel sees it (``/proc/self/status``): uid, effective capabilities,
    ``no_new_privs`` and seccomp mode. Read, not assumed, so ``/metadata`` reports what holds."""
    fields: dict[str, str] = {}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    except OSError:
        return {"uid": os.geteuid()}
    caps: list[str] | None = None
    if "CapEff" in fields:
        mask = int(fields["CapEff"], 16)
        caps = ["ALL"] if mask & ((1 << len(_CAPS)) - 1) == (1 << len(_CAPS)) - 1 else [
            name for bit, name in enumerate(_CAPS) if mask >> bit & 1]
    # None: this kernel does not say (gVisor's /proc has no NoNewPrivs line).
    no_new_privs = None if "NoNewPrivs" not in fields else fields["NoNewPrivs"] == "1"
    return {"uid": os.geteuid(), "capabilities": caps, "no_new_privs": no_new_privs,
            "seccomp": {"0": "off", "1": "strict", "2": "filter"}.get(fields.get("Seccomp", ""), "unknown")}


@functools.cache
def under_gvisor() -> bool:
    """True when this process runs on gVisor's kernel (``runsc``), told from inside: its kernel
    log (when readable) or the fixed ``uname`` it reports."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        buffer = ctypes.create_string_buffer(512)
        read = libc.klogctl(3, buffer, len(buffer))  # SYSLOG_ACTION_READ_ALL
        if read > 0 and b"Starting gVisor" in buffer.raw[:read]:
            return True
    except (OSError, AttributeError):
        pass
    return (os.uname().release, os.uname().version) == _GVISOR_UNAME


def container_limits() -> dict[str, int | None]:
    """The memory and process limits of our cgroup (the container's), when readable."""
    def read(*candidates: str) -> int | None:
        for candidate in candidates:
            try:
                text = Path(candidate).read_text().strip()
            except OSError:
                continue
            # cgroup v1 spells "no limit" as a huge number, v2 as "max".
            return None if text == "max" or not text.isdigit() or int(text) >= 1 << 60 else int(text)
        return None

    return {"memory_bytes": read("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"),
            "processes": read("/sys/fs/cgroup/pids.max", "/sys/fs/cgroup/pids/pids.max")}


#: Directories commonly world-writable besides mount points (checked, not assumed).
_USUAL_WRITABLE = ("/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue", "/run/lock", "/var/lock")


def world_writable_dirs() -> list[str]:
    """Directories any uid may create files in: world-writable, on a writable file system (the
    usual suspects and every mount point, from ``/proc/self/mountinfo``). What an execution may
    write outside its own directory is exactly what is in these."""
    candidates = set(_USUAL_WRITABLE)
    try:
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            fields = line.split()
            if len(fields) > 4:
                candidates.add(fields[4].replace("\\040", " "))
    except OSError:
        pass
    found = []
    for path in sorted(candidates):
        try:
            if os.path.islink(path) or not stat.S_ISDIR(os.stat(path).st_mode):
                continue
            if os.stat(path).st_mode & stat.S_IWOTH and not os.statvfs(path).f_flag & os.ST_RDONLY:
                found.append(path)
        except OSError:
            continue
    return found


def same_uid_processes() -> list[str]:
    """Other processes of our uid that are dumpable: an execution sharing our uid could read their
    memory and ``/proc/<pid>/environ`` (e.g. a container's init holding the container's
    environment). ``"<pid> (<name>)"`` each; our own descendants are left out."""
    me, uid = os.getpid(), os.getuid()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            status = dict(line.split(":", 1) for line in (entry / "status").read_text().splitlines() if ":" in line)
            if int(status["Uid"].split()[0]) != uid or int(status["PPid"]) == me or "VmSize" not in status:
                continue  # not ours, our child, or a kernel thread (no memory of its own)
            # A process that is not dumpable has its /proc files owned by root.
            if (entry / "environ").stat().st_uid != uid:
                continue
        except (OSError, KeyError, ValueError):
            continue
        found.append(f"{entry.name} ({status.get('Name', '?').strip()})")
    return found


@functools.cache
def outer_boundary() -> dict[str, Any]:
    """Boundaries around this process that the sandbox sits inside of, as detected from here."""
    container = None
    if os.path.exists("/.dockerenv"):
        container = "docker"
    elif os.path.exists("/run/.containerenv"):
        container = "podman"
    elif os.environ.get("OPENENV_PROVIDER") == "docker":
        container = "docker"
    return {"container": container, "gvisor": under_gvisor(), "gvisor_runsc": shutil.which("runsc")}


def make_undumpable() -> bool:
    """``prctl(PR_SET_DUMPABLE, 0)`` on this process: processes of the same uid (without
    ``CAP_SYS_PTRACE``) can then neither trace it nor read its memory or ``/proc/<pid>/environ``."""
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) == 0  # PR_SET_DUMPABLE
    except (OSError, AttributeError):
        return False


@functools.cache
def syscall_filter_support(python: str, program: bytes) -> str | None:
    """None when ``program`` installs as a seccomp filter here and refuses ``socket(AF_INET)``
    while ``socketpair`` still works; else the reason (probed in a throw-away interpreter)."""
    from openenv_sandbox import _child

    source = Path(_child.__file__).read_text(encoding="utf-8")
    try:
        done = subprocess.run([python, "-I", "-c", source, "probe-filter", program.hex()], capture_output=True,
                              text=True, timeout=10, env={"PATH": SAFE_PATH})
    except (OSError, subprocess.SubprocessError) as exc:
        return f"could not probe the seccomp filter: {exc}"
    return None if done.returncode == 0 else (done.stdout.strip() or f"probe exited with {done.returncode}")


def processes_of(uids: range, *, include_zombies: bool = False) -> list[tuple[int, int]]:
    """``(pid, uid)`` of every process whose real uid is in ``uids`` (from ``/proc``): what is left
    of the sandbox's slots (there should be nothing between executions). Zombies (dead, waiting
    for their parent to reap them) are left out unless ``include_zombies``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        try:
            uid = int(fields["Uid"].split()[0])
        except (KeyError, ValueError, IndexError):
            continue
        if uid in uids and (include_zombies or not fields.get("State", "").strip().startswith("Z")):
            found.append((int(entry.name), uid))
    return found
