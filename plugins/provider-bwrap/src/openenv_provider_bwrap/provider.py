"""The ``bwrap`` provider: ``openenv serve`` inside a rootless bubblewrap sandbox, reached on 127.0.0.1.

For hosts where no container daemon is allowed (HPC login and compute nodes, shared machines).
What the sandbox is:

* new user, pid, ipc, uts and (where the kernel allows) cgroup namespaces; the server runs as this
  user, mapped into its own user namespace, so nothing needs root or a setuid helper;
* a read-only file system made of the system folders (``/usr``, ``/etc``, ``/bin``, ``/lib*``…),
  this Python's prefix and every ``sys.path`` entry (the venv and the env's package), and the
  working directory; ``options["root"] = "full"`` binds all of ``/`` read-only instead. Nothing
  else of the host (home folders, other checkouts) is visible;
* a private ``/tmp`` (tmpfs), a minimal private ``/dev`` and its own ``/proc``;
* **no network** (``--unshare-net``): the sandbox has only its own loopback. The server is still
  reached on the host's 127.0.0.1 because it serves on a listening socket bound *here*, before
  the sandbox starts, and handed down as a file descriptor (``openenv serve --fd``): a socket keeps
  the network namespace it was created in. So clients connect straight to the server (no relay,
  no extra hop), while the env's own code cannot open a connection anywhere.
  ``options["network"] = True`` shares the host's network instead (for envs that fetch data);
* resource limits as rlimits through ``prlimit`` (util-linux): ``memory`` (address space, e.g.
  ``"2g"``), ``cpu_time_s``, ``nofile``, ``nproc``, ``fsize``; cgroups are not used (a rootless
  user rarely has a delegated cgroup tree);
* ``--die-with-parent`` (unless ``options["detach"]``): the sandbox is killed when this process
  exits. A detached sandbox gets neither that nor the parent-death signal, so it outlives us until
  ``stop`` or, once we are gone, ``gc``. The server stays in the process group we created, so
  ``stop``/``gc`` send SIGTERM to it directly and it shuts down gracefully.

Everything else (records, ``ps``/``gc``, logs, readiness, ``stop``) is the ``local`` provider's
(``openenv_provider_local.base``). The server writes its ready file into a per-server scratch
folder (``<state dir>/<id>.d``), the only host folder the sandbox may write to.

Without bwrap, or where the kernel refuses unprivileged user namespaces, ``start`` raises
``EngineUnavailable`` with a one-line message naming the package or the sysctl to change, before
anything is started.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, ClassVar

from openenv.errors import ConfigError
from openenv.interfaces import EngineUnavailable, LaunchSpec
from openenv_provider_local.base import ProcessProvider
from openenv_provider_local.records import state_dir

__all__ = ["BwrapProvider", "LIMIT_OPTIONS", "parse_size", "preflight"]

#: ``LaunchSpec.options`` keys that become rlimits, and ``prlimit``'s flag for each.
LIMIT_OPTIONS: dict[str, str] = {
    "memory": "--as", "cpu_time_s": "--cpu", "nofile": "--nofile", "nproc": "--nproc", "fsize": "--fsize",
}

#: Host folders every sandbox sees read-only (those that exist here; a symlink stays a symlink).
SYSTEM_PATHS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")

#: Folders never bound whole (a caller working in /tmp must not undo the private /tmp).
_NEVER_BOUND = frozenset({"/", "/tmp", "/var/tmp", "/dev", "/proc", "/run"})

_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*$", re.IGNORECASE)

_PREFLIGHT: dict[str, str | None] = {}
_PREFLIGHT_LOCK = threading.Lock()


def parse_size(value: Any, name: str = "memory") -> int:
    """Bytes from ``1073741824``, ``"512m"``, ``"2g"`` or ``"1.5GiB"``; ``ConfigError`` otherwise."""
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    match = _SIZE.match(str(value))
    if not match or isinstance(value, bool):
        raise ConfigError(f"Provider 'bwrap': options['{name}'] = {value!r} is not a size: use bytes "
                          "or a number with k, m, g or t (e.g. '2g').")
    scale = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[match.group(2).lower()]
    size = int(float(match.group(1)) * scale)
    if size <= 0:
        raise ConfigError(f"Provider 'bwrap': options['{name}'] must be positive, got {value!r}.")
    return size


def preflight(bwrap: str | None = None) -> str:
    """The bwrap executable, once a throw-away sandbox with the namespaces we use has started.

    Raises ``EngineUnavailable`` (one line: what to install or which sysctl to change). The
    answer is cached per executable: the kernel's settings do not change under a running process.
    """
    found = bwrap or shutil.which("bwrap")
    if not found:
        raise EngineUnavailable(
            "Provider 'bwrap': bubblewrap is not installed (no 'bwrap' on PATH). Install it: "
            "`apt-get install bubblewrap` (Debian/Ubuntu) or `dnf install bubblewrap` (Fedora/RHEL).")
    with _PREFLIGHT_LOCK:
        if found not in _PREFLIGHT:
            _PREFLIGHT[found] = _probe(found)
        problem = _PREFLIGHT[found]
    if problem:
        raise EngineUnavailable(problem)
    return found


def _probe(bwrap: str) -> str | None:
    argv = [bwrap, "--unshare-user", "--unshare-pid", "--unshare-net", "--ro-bind", "/", "/",
            "--proc", "/proc", "--dev", "/dev", "--", "true"]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"Provider 'bwrap': cannot run {bwrap} ({exc}). Reinstall bubblewrap (`apt-get install bubblewrap`)."
    if out.returncode == 0:
        return None
    said = (out.stderr.strip().splitlines() or [f"exit code {out.returncode}"])[-1]
    if re.search(r"namespace|permission|not permitted|No space left", said, re.IGNORECASE):
        return (f"Provider 'bwrap': this kernel refuses unprivileged user namespaces ({said}). Enable "
                "them: `sysctl -w kernel.unprivileged_userns_clone=1` (Debian) or `sysctl -w "
                "user.max_user_namespaces=15000`; on Ubuntu 24.04+ also `sysctl -w "
                "kernel.apparmor_restrict_unprivileged_userns=0`.")
    return f"Provider 'bwrap': a test sandbox failed to start ({said}). Check `{bwrap} --version` works."


class BwrapProvider(ProcessProvider):
    """Env servers in rootless bubblewrap sandboxes, served on a socket bound on 127.0.0.1 here."""

    name: ClassVar[str] = "bwrap"
    requires: ClassVar[str] = ("bubblewrap (`apt-get install bubblewrap`) and unprivileged user namespaces; its own "
                               "tests run where .ci/bwrap-setup.sh installed it")
    options: ClassVar[frozenset[str]] = frozenset({"network", "root", "bwrap", "bind", *LIMIT_OPTIONS})

    def check(self, spec: LaunchSpec) -> None:
        super().check(spec)
        opts = spec.options
        if opts.get("root", "minimal") not in ("minimal", "full"):
            raise ConfigError(f"Provider 'bwrap': options['root'] = {opts['root']!r}: use 'minimal' (the "
                              "system folders, this Python and its packages) or 'full' (all of / read-only).")
        for key in LIMIT_OPTIONS:
            if opts.get(key) is not None:
                self._limit_value(key, opts[key])
        if any(opts.get(key) is not None for key in LIMIT_OPTIONS) and not shutil.which("prlimit"):
            raise ConfigError("Provider 'bwrap': resource limits need `prlimit` (util-linux), which is not on "
                              "PATH: `apt-get install util-linux`, or drop the limit options.")
        if ":" not in spec.env:
            from openenv.plugins import get_plugin_manager

            get_plugin_manager().catalog.envs.get(spec.env)  # an unknown name fails here, with did-you-mean
        preflight(opts.get("bwrap"))

    def child_environment(self, spec: LaunchSpec) -> dict[str, str]:
        env = super().child_environment(spec)
        # In its pid namespace the server's parent is pid 1 (bwrap's init), which `openenv serve`
        # would take for "my parent is gone"; bwrap's --die-with-parent does that job instead.
        env.pop("OPENENV_DIE_WITH_PARENT", None)
        return env

    def listen_socket(self, spec: LaunchSpec) -> socket.socket:
        # Bound here, in the host's network namespace: the server in the sandbox accepts on it.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        try:
            sock.bind(("127.0.0.1", 0))
            sock.listen(1024)
        except BaseException:
            sock.close()
            raise
        return sock

    def ready_path(self, server_id: str) -> Path:
        scratch = state_dir() / f"{server_id}.d"
        scratch.mkdir(mode=0o700, exist_ok=True)
        return scratch / "ready"

    def command(self, spec: LaunchSpec, serve_args: list[str]) -> list[str]:
        opts = spec.options
        bwrap = preflight(opts.get("bwrap"))
        ready_dir = str(Path(serve_args[serve_args.index("--ready-file") + 1]).parent)
        cwd = os.path.abspath(opts.get("cwd") or os.getcwd())
        argv = [bwrap, "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                "--unshare-cgroup-try", "--hostname", "openenv-sandbox"]
        if not opts.get("detach"):
            # bwrap's --die-with-parent SIGKILLs the sandbox when *our* process dies: right for an
            # attached server, fatal for a detached one, which must outlive us until stop or gc
            # (both of which signal the whole process group, sandbox included).
            argv.insert(1, "--die-with-parent")
        if not opts.get("network"):
            argv.append("--unshare-net")
        if opts.get("root", "minimal") == "full":
            argv += ["--ro-bind", "/", "/"]
        else:
            for path in SYSTEM_PATHS:
                if os.path.islink(path):
                    argv += ["--symlink", os.readlink(path), path]
                elif os.path.isdir(path):
                    argv += ["--ro-bind", path, path]
        argv += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
        # After the tmpfs, so that a venv or a checkout under /tmp is bound over it, not hidden.
        for path in _python_paths(spec, cwd, extra=opts.get("bind")):
            argv += ["--ro-bind", path, path]
        argv += ["--bind", ready_dir, ready_dir, "--chdir", cwd, "--setenv", "HOME", "/tmp", "--"]
        argv += self._prlimit(opts)
        return [*argv, sys.executable, "-m", "openenv", "serve", *serve_args]

    def _prlimit(self, opts: dict[str, Any]) -> list[str]:
        limits = [f"{flag}={self._limit_value(key, opts[key])}" for key, flag in LIMIT_OPTIONS.items()
                  if opts.get(key) is not None]
        if not limits:
            return []
        prlimit = shutil.which("prlimit") or "prlimit"
        return [prlimit, *limits, "--"]

    @staticmethod
    def _limit_value(key: str, value: Any) -> int:
        if key in ("memory", "fsize"):
            return parse_size(value, key)
        if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
            raise ConfigError(f"Provider 'bwrap': options['{key}'] = {value!r} must be a positive number.")
        return max(1, int(value))


def _python_paths(spec: LaunchSpec, cwd: str, extra: Any = None) -> list[str]:
    """Folders the server needs read-only: this Python, its packages, PYTHONPATH, the working
    directory and ``options["bind"]``, without those already inside another one or a system path."""
    # sys.path[0] is the caller's script folder (or ""): the server, run as `-m openenv`, needs none.
    wanted = [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable)),
              *sys.path[1:], cwd]
    pythonpath = spec.env_vars.get("PYTHONPATH", os.environ.get("PYTHONPATH", ""))
    wanted += [p for p in pythonpath.split(os.pathsep) if p]
    wanted += [extra] if isinstance(extra, str) else [str(p) for p in (extra or [])]
    folders = sorted({os.path.abspath(p) for p in wanted if p and os.path.isdir(p)})
    kept: list[str] = []
    for folder in folders:
        covered = [*kept, *SYSTEM_PATHS]
        if folder in _NEVER_BOUND or any(folder == c or folder.startswith(c.rstrip("/") + "/") for c in covered):
            continue
        kept.append(folder)
    return kept
