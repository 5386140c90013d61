"""``Sandbox.boundary``: the isolation a sandbox applies on this host, in words, for ``/metadata``.

Every statement is derived from what was probed or observed here, never from what a provider
meant to configure: the uid drop, the network namespace and the seccomp filter (probed when the
sandbox starts), the server's own capabilities and a container or gVisor around it (read from
``/proc``), and a **self-check**: one execution that tries what a hostile one would (read the
environment of the server and of PID 1, signal the server, open an ``AF_INET`` socket, create
files in every world-writable directory) and reports what succeeded. Kernels differ (gVisor's
``/proc`` for one), so the self-check has the last word on those points.

``enforced`` lists what holds for every execution; ``not_enforced`` what does not.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from openenv_sandbox.host import (
    container_limits,
    outer_boundary,
    same_uid_processes,
    server_process,
    world_writable_dirs,
)
from openenv_sandbox.limits import Limits
from openenv_sandbox.syscall_filter import DENIED

__all__ = ["Facts", "SELF_CHECK", "describe", "self_check_code"]


@dataclass(frozen=True)
class Facts:
    """What a ``Sandbox`` found out about this host when it started, and its self-check."""

    uids: tuple[int, ...]
    net_problem: str | None
    filter_problem: str | None
    pool_problem: str | None
    undumpable: bool
    limits: Limits
    python: str
    #: The self-check's findings (``self_check_code``), or ``{"error": ...}`` when it failed.
    observed: dict[str, Any]


#: What the self-check execution tries; ``SERVER`` and ``CANDIDATES`` are filled in.
SELF_CHECK = """\
import json, os, socket
out = {"environ_readable": [], "writable": []}
for pid in sorted({SERVER, 1}):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            f.read(1)
        out["environ_readable"].append(pid)
    except OSError:
        pass
try:
    os.kill(SERVER, 0)
    out["can_signal_server"] = True
except OSError:
    out["can_signal_server"] = False
try:
    socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
    out["inet_socket"] = True
except OSError:
    out["inet_socket"] = False
for directory in CANDIDATES:
    probe = os.path.join(directory, f".openenv-sandbox-probe-{os.getpid()}")
    try:
        open(probe, "x").close()
        os.remove(probe)
        out["writable"].append(directory)
    except OSError:
        pass
print(json.dumps(out))
"""


def self_check_code() -> str:
    """The self-check for this process as the server, over this host's world-writable directories."""
    return SELF_CHECK.replace("SERVER", str(os.getpid())).replace("CANDIDATES", repr(world_writable_dirs()))


def parse_self_check(stdout: str, exit_code: int | None, stderr: str) -> dict[str, Any]:
    try:
        found = json.loads(stdout.strip().splitlines()[-1])
        if isinstance(found, dict) and exit_code == 0:
            return found
    except (ValueError, IndexError):
        pass
    return {"error": f"the boundary self-check failed (exit code {exit_code}): {stderr.strip()[-300:]}"}


def _size(n: int) -> str:
    return f"{n / (1 << 30):g} GiB" if n >= 1 << 30 else f"{n / (1 << 20):g} MiB"


def _process_name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f"{pid} ({f.read().strip()})"
    except OSError:
        return str(pid)


def describe(facts: Facts) -> dict[str, Any]:
    outer = outer_boundary()
    server = server_process()
    lim, seen = facts.limits, facts.observed
    dropped = bool(facts.uids)
    enforced = [
        "a separate process in its own session and process group, killed with it at the wall-clock limit "
        f"({lim.wall_time_s:g} s); never in the server process",
        f"per-process limits: CPU {lim.cpu_time_s} s, address space {_size(lim.memory_bytes)}, {lim.processes} "
        + ("processes per slot uid" if dropped else "processes beyond those the server's uid runs at launch")
        + f", {lim.open_files} open files, files up to {_size(lim.file_size_bytes)}, output cut at "
        f"{lim.output_bytes} bytes per stream",
        "a fresh empty working directory (or the session's own tree), mode 0700",
        "a minimal environment (PATH, HOME, TMPDIR, LANG, PYTHON*): nothing inherited from the server",
    ]
    not_enforced = ["no PID namespace: every process of the host or container and its command line is visible",
                    "world-readable files are readable"]
    if "error" in seen:
        not_enforced.append(f"UNVERIFIED: {seen['error']}; the statements below are not checked")
    writable = list(seen.get("writable", world_writable_dirs()))
    if writable:
        not_enforced.append("outside its directory an execution can write only in world-writable directories, "
                            f"and files it leaves there survive it: {', '.join(writable)}")
    else:
        enforced.append("outside its directory an execution can write nowhere (checked)")
    not_enforced.append("no disk quota: the file-size limit caps each file, not the total")
    if dropped:
        enforced.append(f"its own uid per concurrent slot ({facts.uids[0]}..{facts.uids[-1]}), no supplementary "
                        "groups: other sessions' executions and trees are out of its reach")
        enforced.append("every process of the slot's uid is killed when the execution ends: nothing outlives it")
    else:
        not_enforced.append(f"executions run as the server's own uid ({server['uid']}): they can read or change "
                            "everything that uid owns, other sessions' working trees included; processes that "
                            "leave the process group are not tracked")
        exposed = same_uid_processes()
        if exposed:
            not_enforced.append("other processes of the server's uid are readable by executions (memory, "
                                "/proc/<pid>/environ, so any secret in their environment): "
                                + ", ".join(exposed[:10]) + (f" and {len(exposed) - 10} more" if len(exposed) > 10
                                                              else ""))
    readable = [int(p) for p in seen.get("environ_readable", [])]
    if readable:
        not_enforced.append("executions can read the environment (/proc/<pid>/environ, so the token and any "
                            f"secret in it) of: {', '.join(_process_name(p) for p in readable)}")
    elif "error" not in seen:
        enforced.append("the environment of the server and of PID 1 (/proc/<pid>/environ: the token, any "
                        "secret) is unreadable (checked)" + (
                            "; the server process is not dumpable, which is what keeps it so" if facts.undumpable
                            else ""))
    if seen.get("can_signal_server"):
        not_enforced.append("executions can signal (kill) the server")
    elif "error" not in seen:
        enforced.append("executions cannot signal the server (checked)")
    offline = facts.net_problem is None or (facts.filter_problem is None and not seen.get("inet_socket"))
    if facts.net_problem is None:
        enforced.append("no network: a new, empty network namespace per execution")
    elif offline:
        enforced.append("no network: socket() of every address family but AF_UNIX is refused (seccomp, checked); "
                        f"network namespaces are unavailable ({facts.net_problem})")
    else:
        not_enforced.append(f"NETWORK: the execution shares the server's network ({facts.net_problem}; "
                            f"no seccomp filter: {facts.filter_problem})")
    if facts.filter_problem is None:
        enforced.append("seccomp filter refusing: " + "; ".join(DENIED))
        not_enforced.append("Unix sockets the execution's uid may open (paths, and abstract names in its "
                            "network namespace) stay reachable")
    else:
        not_enforced.append(f"no seccomp filter ({facts.filter_problem}): every system call the kernel "
                            "allows an unprivileged process is reachable")
    if lim.processes > 1:
        memory = container_limits()["memory_bytes"] if outer["container"] else None
        not_enforced.append("memory is limited per process, not per execution" + (
            f" (the container's memory limit, {_size(memory)}, caps the server and all executions together)"
            if memory else ""))
    if outer["gvisor"]:
        enforced.append("gVisor: every system call is served by gVisor's user-space kernel (runsc), not by the "
                        "host's kernel")
        outermost = f"gVisor sandbox ({outer['container'] or 'runsc'})"
    else:
        not_enforced.append("the host kernel is shared: a kernel vulnerability reachable by an unprivileged "
                            "process is an escape" + (
                                "; runsc is installed here: the docker provider runs envs that declare a "
                                "sandbox under it when the engine registers the runtime"
                                if outer["gvisor_runsc"] else "; gVisor (runsc) is not in use"))
        outermost = f"{outer['container']} container (shared host kernel)" if outer["container"] else \
            "this host's kernel (no container)"
    if outer["container"]:
        enforced.append(f"the server runs in a {outer['container']} container: executions see only its files "
                        "and its network")
    return {
        "runner": ("warm zygote pool (one fork per execution)" if facts.pool_problem is None
                   else f"fresh interpreter per execution (pool unavailable: {facts.pool_problem})"),
        "privileges": (f"dropped to uid/gid {facts.uids[0]}..{facts.uids[-1]} (one per concurrent slot), no "
                       "supplementary groups" if dropped else
                       "NOT dropped: the server does not run as root with CAP_SETUID/CAP_SETGID/CAP_CHOWN, so "
                       "executions run as the server's uid"),
        "network": ("none: a new, empty network namespace per execution" if facts.net_problem is None else
                    "none: socket() limited to AF_UNIX by the seccomp filter (no network namespace: "
                    f"{facts.net_problem})" if offline else f"HOST NETWORK: {facts.net_problem}"),
        "syscall_filter": ("seccomp: " + "; ".join(DENIED)) if facts.filter_problem is None
        else f"NONE: {facts.filter_problem}",
        "pid_namespace": False,
        "cleanup": ("whole process group and every process of the slot's uid killed at the end"
                    if dropped else "process group killed at the end (escaped processes are not tracked)"),
        "limits": lim.to_dict(),
        "interpreter": facts.python,
        **outer,
        "server_process": {**server, "dumpable": not facts.undumpable},
        "world_writable_dirs": writable,
        "self_check": seen,
        "outermost_boundary": outermost,
        "enforced": enforced,
        "not_enforced": not_enforced,
    }
