"""What the benchmark reads from ``/proc`` and the OS: CPU time, memory, threads, machine facts.

Promises: every reader returns ``None`` instead of raising when the process is gone or the file
is unreadable (a benchmark reports, it does not crash on a race with a dying process); CPU times
are in seconds (``utime + stime`` of every thread of the process, from ``/proc/<pid>/stat``).
"""

from __future__ import annotations

import os
import platform
import resource
import sys
from typing import Any

__all__ = [
    "CLOCK_TICKS",
    "cpu_seconds",
    "cpu_times",
    "die_with_parent",
    "fault_and_switch_counts",
    "machine_info",
    "open_fds",
    "pin",
    "pinning_plan",
    "raise_nofile",
    "rss_mib",
    "status_fields",
    "threads",
    "usable_cpus",
]

CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_times(pid: int) -> tuple[float, float] | None:
    """(user, system) CPU seconds consumed so far by every thread of ``pid``."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            raw = f.read()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    fields = raw[raw.rfind(")") + 2:].split()
    # After the name, field 3 (state) is index 0, so utime (14) and stime (15) are 11 and 12.
    return int(fields[11]) / CLOCK_TICKS, int(fields[12]) / CLOCK_TICKS


def fault_and_switch_counts(pid: int) -> tuple[int, int] | None:
    """(minor page faults, context switches) of ``pid`` so far: what kernel time is spent on
    besides the syscalls themselves (fresh pages for a growing heap, sleeping and waking up)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as f:
            raw = f.read()
    except OSError:
        return None
    minflt = int(raw[raw.rfind(")") + 2:].split()[7])  # field 10
    fields = status_fields(pid)
    switches = int(fields.get("voluntary_ctxt_switches", 0)) + int(fields.get("nonvoluntary_ctxt_switches", 0))
    return minflt, switches


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds consumed so far by every thread of ``pid``."""
    times = cpu_times(pid)
    return None if times is None else times[0] + times[1]


def status_fields(pid: int) -> dict[str, str]:
    """``/proc/<pid>/status`` as a dict (empty when unreadable)."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        return {}
    out = {}
    for line in lines:
        key, _, value = line.partition(":")
        out[key] = value.strip()
    return out


def rss_mib(pid: int, fields: dict[str, str] | None = None) -> float | None:
    """Resident set size (``VmRSS``) in MiB."""
    value = (fields if fields is not None else status_fields(pid)).get("VmRSS")
    if not value:
        return None
    return int(value.split()[0]) / 1024  # kB


def threads(pid: int, fields: dict[str, str] | None = None) -> int | None:
    """Number of OS threads of ``pid``."""
    value = (fields if fields is not None else status_fields(pid)).get("Threads")
    return int(value) if value else None


def open_fds(pid: int) -> int | None:
    """Number of open file descriptors of ``pid``."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


def raise_nofile(wanted: int) -> int:
    """Raise this process's soft ``RLIMIT_NOFILE`` towards ``wanted`` (capped by the hard limit).

    Returns the soft limit now in force. Children inherit it, which is how servers started by the
    benchmark get room for thousands of sockets.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if target > soft:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft


def usable_cpus() -> list[int]:
    """CPUs this process may run on, sorted."""
    try:
        return sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return list(range(os.cpu_count() or 1))


def pinning_plan() -> dict[str, list[int] | None]:
    """Which CPUs the server and the load generators get.

    With two or more CPUs: the server alone on the first, the load generator (and this
    orchestrator, which mostly sleeps) on the second, so the client never steals the server's
    core. With one CPU there is nothing to separate and nothing is pinned.
    """
    cpus = usable_cpus()
    if len(cpus) < 2:
        return {"server": None, "load": None}
    return {"server": [cpus[0]], "load": [cpus[1]]}


def pin(cpus: list[int] | None) -> None:
    """Pin the calling process (and the threads it creates later) to ``cpus``; no-op for None."""
    if cpus:
        try:
            os.sched_setaffinity(0, set(cpus))
        except (AttributeError, OSError):
            pass


def die_with_parent() -> None:
    """In a child about to ``exec``: ask Linux to SIGTERM it when the benchmark dies (no-op elsewhere).

    The benchmark stops its servers by PID in ``finally`` blocks; this covers the case where it is
    killed outright and never reaches them.
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def _mem_total_mib() -> float | None:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 1024)
    except OSError:
        pass
    return None


def machine_info() -> dict[str, Any]:
    """CPU model, core count, memory, kernel, Python, and the load when the run started."""
    return {
        "cpu_model": _cpu_model(),
        "cpus_online": os.cpu_count(),
        "cpus_usable": len(usable_cpus()),
        "mem_total_mib": _mem_total_mib(),
        "kernel": platform.release(),
        "python": sys.version.split()[0],
        "python_implementation": platform.python_implementation(),
        "loadavg_at_start": _loadavg(),
    }
