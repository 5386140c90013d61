"""Runs the kernel's command under limits: ``python -m openenv_env_jupyter._launch LIMITS_JSON -- CMD...``.

A launcher process (not ``preexec_fn``, which is unsafe in a threaded server) applies the resource
limits, moves into a new network namespace when the OS allows it, writes what it got to
``LIMITS_JSON["report"]`` and then ``exec``s the kernel, which keeps its pid and process group.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import sys

__all__ = ["main"]

_CLONE_NEWUSER = 0x10000000
_CLONE_NEWNET = 0x40000000


def _unshare_network() -> str:
    """A new network namespace (only a loopback device, down); the text says what happened."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(_CLONE_NEWNET) == 0:
        return "none (new network namespace)"
    # Unprivileged: a user namespace makes the network namespace possible where the OS allows it.
    if libc.unshare(_CLONE_NEWUSER | _CLONE_NEWNET) == 0:
        return "none (new user and network namespace)"
    return f"host (unshare refused: {os.strerror(ctypes.get_errno())})"


def main(argv: list[str]) -> None:
    if len(argv) < 3 or argv[1] != "--":
        raise SystemExit("usage: python -m openenv_env_jupyter._launch LIMITS_JSON -- CMD...")
    config = json.loads(argv[0])
    limits = {
        "memory_bytes": resource.RLIMIT_AS, "cpu_s": resource.RLIMIT_CPU,
        "open_files": resource.RLIMIT_NOFILE, "file_size_bytes": resource.RLIMIT_FSIZE,
    }
    for name, which in limits.items():
        value = int(config[name])
        resource.setrlimit(which, (value, value))
    network = _unshare_network() if config.get("isolate_network", True) else "host (isolation off)"
    with open(config["report"], "w", encoding="utf-8") as report:
        json.dump({"network": network, "limits": {k: config[k] for k in limits}}, report)
    os.execv(argv[2], argv[2:])


if __name__ == "__main__":
    main(sys.argv[1:])
