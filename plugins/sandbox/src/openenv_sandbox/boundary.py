"""``Sandbox.boundary``: the isolation a sandbox applies on this host, in words, for ``/metadata``.

Every statement is derived from what was probed or observed here (the uid drop, the network
namespace, the seccomp filter, the server's own capabilities, a container or gVisor around us),
never from what a provider meant to configure. ``enforced`` lists what holds for every execution;
``not_enforced`` what does not, so a reader knows what the sandbox does not protect against.
"""

from __future__ import annotations

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

__all__ = ["Facts", "describe"]


@dataclass(frozen=True)
class Facts:
    """What a ``Sandbox`` found out about this host when it started."""

    uids: tuple[int, ...]
    net_problem: str | None
    filter_problem: str | None
    pool_problem: str | None
    undumpable: bool
    limits: Limits
    python: str


def _size(n: int) -> str:
    return f"{n / (1 << 30):g} GiB" if n >= 1 << 30 else f"{n / (1 << 20):g} MiB"


def describe(facts: Facts) -> dict[str, Any]:
    outer = outer_boundary()
    server = server_process()
    lim = facts.limits
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
    writable = world_writable_dirs()
    not_enforced = ["no PID namespace: every process of the host or container and its command line is visible",
                    "world-readable files are readable"]
    if writable:
        not_enforced.append("outside its directory an execution can write only in world-writable directories, "
                            f"and files it leaves there survive it: {', '.join(writable)}")
    else:
        enforced.append("outside its directory an execution can write nowhere (no world-writable directory on a "
                        "writable file system)")
    not_enforced.append("no disk quota: the file-size limit caps each file, not the total")
    if dropped:
        enforced.append(f"its own uid per concurrent slot ({facts.uids[0]}..{facts.uids[-1]}), no supplementary "
                        "groups: it cannot signal, trace or read the server, the zygote or other sessions' "
                        "executions and trees")
        enforced.append("every process of the slot's uid is killed when the execution ends: nothing outlives it")
    else:
        not_enforced.append(f"executions run as the server's own uid ({server['uid']}): they can signal (kill) "
                            "the server and read or change everything that uid owns, other sessions' working "
                            "trees included; processes that leave the process group are not tracked")
        if facts.undumpable:
            enforced.append("the server process is not dumpable: same-uid executions can neither trace it nor "
                            "read its memory or /proc/<pid>/environ (its token and environment)")
        exposed = same_uid_processes()
        if exposed:
            not_enforced.append("other processes of the server's uid are readable by executions (memory, "
                                "/proc/<pid>/environ, so any secret in their environment): "
                                + ", ".join(exposed[:10]) + (f" and {len(exposed) - 10} more" if len(exposed) > 10
                                                              else ""))
    if facts.net_problem is None:
        enforced.append("no network: a new, empty network namespace per execution")
    elif facts.filter_problem is None:
        enforced.append("no network: socket() of every address family but AF_UNIX is refused (seccomp); "
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
    if lim.memory_bytes and lim.processes > 1:
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
                    f"{facts.net_problem})" if facts.filter_problem is None else
                    f"HOST NETWORK: {facts.net_problem}"),
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
        "outermost_boundary": outermost,
        "enforced": enforced,
        "not_enforced": not_enforced,
    }
