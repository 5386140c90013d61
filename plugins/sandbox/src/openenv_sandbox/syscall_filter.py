"""The seccomp filter every execution runs under: no network, no new namespaces, no access to other
processes' memory, no io_uring, and a few kernel interfaces sandboxed code never needs.

Why a filter on top of the network namespace: a namespace needs ``CAP_SYS_ADMIN``, which a hardened
container (the docker provider's) never has, and Docker's own seccomp profile refuses ``unshare``
without it. A seccomp filter needs no privilege at all once ``PR_SET_NO_NEW_PRIVS`` is set, so it
holds wherever the sandbox runs: on the host, in a container, under gVisor.

``build_filter()`` returns the classic-BPF program (``struct sock_filter`` array, as bytes) that the
child installs with ``prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ...)`` as its last step before it
runs the payload. It is built in the server (here) and sent with the request, so the child's code
stays a self-contained script. What it refuses (``DENIED``):

* ``socket()`` of every address family but ``AF_UNIX``: no TCP/UDP/raw/packet/netlink socket, so
  nothing on any network (the server's own port included) can be reached. ``socketpair`` and Unix
  sockets stay (``asyncio`` and ``multiprocessing`` need them);
* ``io_uring_*``: io_uring can open sockets without the ``socket`` system call;
* ``unshare``, ``setns`` and ``clone`` with a namespace flag: no user namespace (whose "root" widens
  the kernel surface an exploit can reach), no new network namespace; ``clone3`` answers ``ENOSYS``
  (its flags sit in memory a filter cannot read), so the C library falls back to ``clone``;
* ``ptrace``, ``process_vm_readv``/``process_vm_writev``: where privileges cannot be dropped the
  execution has the server's uid, and these would let it read or rewrite the server's memory;
* ``bpf``, ``perf_event_open``, ``userfaultfd``, ``keyctl``/``add_key``/``request_key``: kernel
  interfaces with a long record of exploits that untrusted code has no use for;
* every system call of another ABI (32-bit ``int 0x80`` and x32 on x86-64): a filter checks one
  ABI's numbers, so the others are refused whole.

A refused call fails with ``EPERM`` (``ENOSYS`` for ``clone3``); nothing is killed.
"""

from __future__ import annotations

import errno
import platform
import struct

__all__ = ["DENIED", "build_filter", "unsupported"]

#: What the filter refuses, in words (published in ``/metadata``).
DENIED = ("socket() of any family but AF_UNIX", "io_uring", "unshare/setns/clone with namespace flags (clone3: ENOSYS)",
          "ptrace, process_vm_readv/writev", "bpf, perf_event_open, userfaultfd, keyctl/add_key/request_key",
          "system calls of other ABIs (32-bit, x32)")

_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_AF_UNIX = 1
#: CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET
_NAMESPACE_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
#: x32 system calls on x86-64 carry this bit in their number.
_X32_BIT = 0x40000000

# Offsets into ``struct seccomp_data``: int nr; u32 arch; u64 instruction_pointer; u64 args[6].
_NR, _ARCH, _ARG0_LOW = 0, 4, 16  # args are little-endian on both architectures: low word first

# Classic BPF opcodes.
_LD_ABS = 0x20   # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15      # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35      # BPF_JMP | BPF_JGE | BPF_K
_JSET = 0x45     # BPF_JMP | BPF_JSET | BPF_K
_RET = 0x06      # BPF_RET | BPF_K

#: Per architecture: ``AUDIT_ARCH_*`` and the system call numbers (from the kernel's unistd headers).
_ARCHES: dict[str, dict[str, int]] = {
    "x86_64": {"audit_arch": 0xC000003E, "socket": 41, "clone": 56, "clone3": 435, "ptrace": 101,
               "process_vm_readv": 310, "process_vm_writev": 311, "unshare": 272, "setns": 308, "bpf": 321,
               "userfaultfd": 323, "perf_event_open": 298, "io_uring_setup": 425, "io_uring_enter": 426,
               "io_uring_register": 427, "keyctl": 250, "add_key": 248, "request_key": 249},
    "aarch64": {"audit_arch": 0xC00000B7, "socket": 198, "clone": 220, "clone3": 435, "ptrace": 117,
                "process_vm_readv": 270, "process_vm_writev": 271, "unshare": 97, "setns": 268, "bpf": 280,
                "userfaultfd": 282, "perf_event_open": 241, "io_uring_setup": 425, "io_uring_enter": 426,
                "io_uring_register": 427, "keyctl": 219, "add_key": 217, "request_key": 218},
}
_REFUSED = ("io_uring_setup", "io_uring_enter", "io_uring_register", "unshare", "setns", "ptrace",
            "process_vm_readv", "process_vm_writev", "bpf", "perf_event_open", "userfaultfd", "keyctl",
            "add_key", "request_key")


def _machine(machine: str | None) -> str:
    name = (machine or platform.machine()).lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(name, name)


def unsupported(machine: str | None = None) -> str | None:
    """None when this architecture is supported, else why there is no filter."""
    name = _machine(machine)
    if name not in _ARCHES:
        return f"no seccomp filter for the {name} architecture (only {', '.join(sorted(_ARCHES))})"
    return None


def build_filter(machine: str | None = None) -> bytes | None:
    """The filter program for ``machine`` (default: this one), or None if unsupported."""
    name = _machine(machine)
    nr = _ARCHES.get(name)
    if nr is None:
        return None
    # (opcode, k, jump-if-true label, jump-if-false label); a label of None means the next one.
    code: list[tuple[int, int, str | None, str | None] | str] = [
        (_LD_ABS, _ARCH, None, None),
        (_JEQ, nr["audit_arch"], None, "deny"),
        (_LD_ABS, _NR, None, None),
    ]
    if name == "x86_64":
        code.append((_JGE, _X32_BIT, "deny", None))
    code += [(_JEQ, nr["socket"], "socket", None), (_JEQ, nr["clone"], "clone", None),
             (_JEQ, nr["clone3"], "enosys", None)]
    code += [(_JEQ, nr[call], "deny", None) for call in _REFUSED]
    code += [(_RET, _RET_ALLOW, None, None),
             "socket", (_LD_ABS, _ARG0_LOW, None, None), (_JEQ, _AF_UNIX, "allow", "deny"),
             "clone", (_LD_ABS, _ARG0_LOW, None, None), (_JSET, _NAMESPACE_FLAGS, "deny", "allow"),
             "allow", (_RET, _RET_ALLOW, None, None),
             "deny", (_RET, _RET_ERRNO | errno.EPERM, None, None),
             "enosys", (_RET, _RET_ERRNO | errno.ENOSYS, None, None)]
    return _assemble(code)


def _assemble(code: list[tuple[int, int, str | None, str | None] | str]) -> bytes:
    labels: dict[str, int] = {}
    index = 0
    for item in code:
        if isinstance(item, str):
            labels[item] = index
        else:
            index += 1
    out = bytearray()
    index = 0
    for item in code:
        if isinstance(item, str):
            continue

        def offset(label: str | None, here: int = index) -> int:
            # Jumps are relative to the next instruction and only go forward (at most 255).
            return 0 if label is None else labels[label] - here - 1

        op, k, true, false = item
        jt, jf = offset(true), offset(false)
        if not (0 <= jt <= 255 and 0 <= jf <= 255):
            raise ValueError(f"seccomp filter jump out of range at instruction {index}")
        out += struct.pack("=HBBI", op, jt, jf, k)  # struct sock_filter {u16 code; u8 jt; u8 jf; u32 k}
        index += 1
    return bytes(out)
