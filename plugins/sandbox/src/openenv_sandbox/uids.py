"""Machine-wide leases of the sandbox's uids.

A ``Sandbox`` that drops privileges runs slot ``i`` as one uid and grades as another. Those uids
are machine-wide: two sandboxes using the same ones (two server processes, ``openenv serve
--workers``, two envs on one host) would share ``RLIMIT_NPROC``. Each slot's end-of-execution sweep
(``kill -1`` as that uid) would also kill the other's running execution. And a session of one could
reach the other's working tree through ``/proc/PID/cwd``. So each Sandbox leases a block of
``slots`` consecutive uids (and the grader uids ``GRADER_UID_OFFSET`` above them) for its whole
life.

The lease is an open-file-description byte-range lock (``F_OFD_SETLK``) on one root-only file,
``/run/openenv-sandbox-uids.lock``, where byte ``u`` stands for uid ``u``. So overlapping blocks of
sandboxes with different bases or sizes conflict exactly, locks held by one process do not merge
(as POSIX record locks would), and the kernel drops a lease when its holder exits, however it
exits. Where ``/run`` is read-only (the docker provider's containers) the file of that name in the
temporary folder serves; a file that is not a private regular file of ours there (one a sandboxed
process planted) is not used. Blocks are tried from ``uid_base`` upwards in steps of ``slots``,
staying below the grader uids of ``uid_base``.

What a lease does not cover: a container without a user namespace has its own ``/run``, so its
sandboxes lease the same uids independently of the host's. Inside the container that is harmless
(other PID namespaces are out of reach). A sandbox in the host's PID namespace on the same machine
should use another ``uid_base`` (``OPENENV_SANDBOX_UID_BASE``).
"""

from __future__ import annotations

import errno
import os
import stat
import struct
import tempfile
import warnings

__all__ = ["LEASE_FILES", "UidLease", "lease_uids"]

#: Where the lock file may be, in order (root-only: only root can drop privileges, so only root leases).
LEASE_FILES = ("/run/openenv-sandbox-uids.lock", os.path.join(tempfile.gettempdir(), "openenv-sandbox-uids.lock"))
_F_WRLCK, _F_UNLCK = 1, 2  # <fcntl.h> on Linux


class UidLease:
    """``count`` agent uids from ``first`` (and, with ``graders``, as many grader uids from
    ``first + offset``), held until ``close()``. ``fd`` is None where nothing could be leased (the
    uids are then used unleased, as before leases existed; a warning said why)."""

    def __init__(self, first: int, count: int, grader_first: int | None, fd: int | None) -> None:
        self.agents = range(first, first + count)
        self.graders = range(grader_first, grader_first + count) if grader_first is not None else None
        self._fd = fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def close(self) -> None:
        """Give the uids back (call once nothing runs as them any more)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)  # closing the description releases its locks


def _lock(fd: int, start: int, length: int, kind: int) -> bool:
    import fcntl

    # struct flock on Linux: short l_type, short l_whence, off_t l_start, off_t l_len, pid_t l_pid
    # (0 for OFD locks); native alignment pads it to the kernel's 32 bytes.
    arg = struct.pack("hhqqi4x", kind, os.SEEK_SET, start, length, 0)
    try:
        fcntl.fcntl(fd, fcntl.F_OFD_SETLK, arg)  # type: ignore[attr-defined,unused-ignore]
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return False
        raise
    return True


def _open_private(path: str) -> int:
    """Open (or create) ``path``: a regular file of our uid that nobody else may open."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o077:
        os.close(fd)
        raise PermissionError(f"not a private file of uid {os.geteuid()} (owner {info.st_uid}, "
                              f"mode {stat.filemode(info.st_mode)})")
    return fd


def lease_uids(base: int, count: int, *, grader_offset: int | None, path: str | None = None) -> UidLease:
    """Lease the first free block of ``count`` uids at ``base + k * count`` (``k = 0, 1, ...``, the
    block staying below ``base + grader_offset``), with its grader block ``grader_offset`` above
    when ``grader_offset`` is given. ``path``: the lock file (default: the first of LEASE_FILES
    that can be used). Raises ``RuntimeError`` when every block is held."""
    import fcntl

    if count < 1:
        raise ValueError(f"count must be at least 1, got {count}")
    limit = base + (grader_offset if grader_offset is not None else 2000)
    unleased = UidLease(base, count, base + grader_offset if grader_offset is not None else None, None)
    if not hasattr(fcntl, "F_OFD_SETLK"):
        warnings.warn("this platform has no open-file-description locks (F_OFD_SETLK): the sandbox's uids are "
                      "not leased, so two sandboxes on this host with the same uid_base share them", stacklevel=3)
        return unleased
    problems = []
    for candidate in (path,) if path else LEASE_FILES:
        try:
            fd = _open_private(candidate)
            break
        except OSError as exc:
            problems.append(f"{candidate}: {exc}")
    else:
        warnings.warn(f"could not open a uid lease file for the sandbox ({'; '.join(problems)}): its uids are not "
                      "leased, so two sandboxes on this host with the same uid_base share them", stacklevel=3)
        return unleased
    try:
        for first in range(base, limit - count + 1, count):
            if not _lock(fd, first, count, _F_WRLCK):
                continue
            if grader_offset is None:
                return UidLease(first, count, None, fd)
            if _lock(fd, first + grader_offset, count, _F_WRLCK):
                return UidLease(first, count, first + grader_offset, fd)
            _lock(fd, first, count, _F_UNLCK)
    except BaseException:
        os.close(fd)
        raise
    os.close(fd)
    raise RuntimeError(
        f"every block of {count} sandbox uids between {base} and {limit - 1} is leased by another sandbox on this "
        f"host ({candidate}): close sandboxes or servers you no longer need, give this one fewer slots, or another "
        "uid_base (OPENENV_SANDBOX_UID_BASE for default_sandbox())")
