"""What the ``local`` and ``uv`` providers share: a child process serving one env, its record,
its log, its readiness wait and its stop.

Promises (``openenv.interfaces.Provider`` / ``ProviderHandle``):

* The server binds 127.0.0.1 on a port chosen by the OS; the child reports it through a ready file
  (``openenv serve --ready-file``), so there is no port race.
* ``start`` builds the handle once the child has said where it listens (so its ``base_url`` is
  never empty), then calls its ``wait_ready``: it returns only when the server is ready
  (``openenv.readiness``; ``options["probe"]`` picks its mode: ``auto``, ``ws`` or ``http``). If the child exits first,
  ``RuntimeError`` is raised at once with its exit code and log tail; after ``startup_timeout_s``,
  ``TimeoutError`` with the log tail. Every failure (Ctrl-C included) kills the child's whole
  process group and removes its record before the exception propagates.
* Secrets (``LaunchSpec.env_vars``, ``token``) reach the child only through its environment, never
  its argv (visible to every user in ``ps``). Without ``token`` the child gets no ``OPENENV_TOKEN``,
  even if this process has one.
* ``stop`` is idempotent and safe after the server died: SIGTERM to the group, SIGKILL after the
  grace period, the leader reaped, record removed.
* The server dies with this process (``PR_SET_PDEATHSIG`` on Linux) unless
  ``options["detach"]`` is true; a detached server outlives us until ``stop`` or, once we are gone,
  ``gc`` (which kills servers whose owner process is dead).
* ``ps``/``gc`` read the records in the state directory (``records.state_dir()``).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import socket
import threading
import time
import uuid
from abc import abstractmethod
from collections import deque
from pathlib import Path
from typing import IO, Any, ClassVar

from openenv.interfaces import HandleInfo, LaunchSpec, Provider, ProviderHandle, owner_alive, owner_id
from openenv.readiness import MODES, STARTUP_HINT, log_tail_text, wait_until_ready
from openenv_provider_local.process import kill_group, proc_stat, spawn
from openenv_provider_local.records import Record, delete_record, read_records, state_dir, write_record

__all__ = ["ProcessHandle", "ProcessProvider", "tail_file"]

log = logging.getLogger("openenv.provider.local")

#: What ``ps``/``gc`` return.
HandleInfos = list[HandleInfo]

#: Options every process provider understands (``LaunchSpec.options``).
COMMON_OPTIONS = frozenset({
    "transports", "step_timeout_s", "idle_timeout_s", "log_level", "keep_logs", "probe", "cwd",
    "detach",
})


def tail_file(path: str | os.PathLike[str] | None, lines: int = 50) -> str:
    """The last ``lines`` lines of a text file ("" if it cannot be read)."""
    if not path or lines <= 0:
        return ""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return "".join(deque(f, maxlen=lines)).rstrip("\n")
    except OSError:
        return ""


class ProcessHandle(ProviderHandle):
    """A server running as a child process group of this process."""

    def __init__(self, provider: str, record: Record, popen: Any, log_file: IO[bytes], *,
                 base_url: str, token: str | None, probe_mode: str, keep_logs: bool) -> None:
        super().__init__(provider=provider, id=record.id, base_url=base_url)
        self.record = record
        self.pid = record.pid
        self.pgid = record.pgid
        self.log_path = record.log or ""
        self.env = record.env
        self._popen = popen
        self._log_file: IO[bytes] | None = log_file
        self._token = token
        self._probe_mode = probe_mode
        self._keep_logs = keep_logs
        self._lock = threading.Lock()
        self._stopped = False
        self._final_tail: str | None = None

    # -- state ------------------------------------------------------------------------------------

    @property
    def exit_code(self) -> int | None:
        """The server's exit code once it has exited (negative: killed by that signal)."""
        return self._popen.poll()

    def is_running(self) -> bool:
        return not self._stopped and self._popen.poll() is None

    def logs(self, tail: int = 50) -> str:
        if self._final_tail is not None:
            return "\n".join(self._final_tail.splitlines()[-tail:]) if tail > 0 else ""
        return tail_file(self.log_path, tail)

    def __repr__(self) -> str:
        return (f"<{type(self).__name__} {self.provider}:{self.id} env={self.env!r} "
                f"url={self.base_url or '?'} pid={self.pid}>")

    # -- readiness --------------------------------------------------------------------------------

    def wait_ready(self, timeout_s: float) -> None:
        wait_until_ready(self.base_url, timeout_s=timeout_s, token=self._token, mode=self._probe_mode,
                         exited=self._exit_description, log_tail=self._log_tail,
                         log_source=self.log_path, what=f"env server '{self.env}'")

    def _exit_description(self) -> str | None:
        return _exit_description(self._popen)

    def _log_tail(self, lines: int = 30) -> str:
        if self._log_file is not None:
            _flush(self._log_file)
        return tail_file(self.log_path, lines)


    # -- stop -------------------------------------------------------------------------------------

    def stop(self, timeout_s: float = 10.0) -> None:
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            emptied = kill_group(self.pgid, grace_s=timeout_s, popen=self._popen)
            self._final_tail = tail_file(self.log_path, 200)
            if self._log_file is not None:
                with contextlib.suppress(OSError):
                    self._log_file.close()
                self._log_file = None
            if not emptied:
                # Keep the record so that `gc` (or `list`) can find and retry it later.
                log.warning("env server %s (process group %d) did not exit; left for gc",
                            self.id, self.pgid)
                return
            _forget(self.record, keep_log=self._keep_logs)


def _exit_description(popen: Any) -> str | None:
    code = popen.poll()
    if code is None:
        return None
    return f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"


def _flush(log_file: IO[bytes]) -> None:
    with contextlib.suppress(OSError, ValueError):
        log_file.flush()


def await_address(popen: Any, ready_file: Path, log_file: IO[bytes], log_path: str, *,
                  deadline: float, timeout_s: float, what: str) -> str:
    """The base URL the child writes to ``ready_file``, once it is there.

    Raises ``RuntimeError`` at once if the child exits first, ``TimeoutError`` at ``deadline``;
    both end with the log tail, as ``openenv.readiness.wait_until_ready`` does.
    """
    def tail() -> str:
        _flush(log_file)
        return tail_file(log_path, 30)

    delay = 0.005
    while True:
        try:
            data = json.loads(ready_file.read_text(encoding="utf-8"))
            return f"http://127.0.0.1:{int(data['port'])}"
        except (OSError, ValueError):
            pass  # not written yet (the child writes it atomically, so never half)
        gone = _exit_description(popen)
        if gone is not None:
            raise RuntimeError(f"{what} {gone} during start-up.{log_tail_text(tail, log_path)}")
        if time.monotonic() >= deadline:
            raise TimeoutError(
                f"{what} did not become ready within {timeout_s:g}s: still not ready after 0 "
                f"checks (last: the server has not said where it listens yet). {STARTUP_HINT}"
                + log_tail_text(tail, log_path))
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 1.5, 0.1)


class ProcessProvider(Provider):
    """Base of the providers that run ``openenv serve`` as a child process group."""

    name: ClassVar[str] = ""
    #: Extra option names this provider accepts (besides ``COMMON_OPTIONS``).
    options: ClassVar[frozenset[str]] = frozenset()

    @abstractmethod
    def command(self, spec: LaunchSpec, serve_args: list[str]) -> list[str]:
        """The argv that runs ``openenv serve <serve_args>`` for ``spec``."""

    def child_environment(self, spec: LaunchSpec) -> dict[str, str]:
        """The child's environment: ours, plus ``spec.env_vars``, plus the token (or none)."""
        env = dict(os.environ)
        env.pop("OPENENV_TOKEN", None)
        env.update({str(k): str(v) for k, v in spec.env_vars.items()})
        if spec.token:
            env["OPENENV_TOKEN"] = spec.token
        env["PYTHONUNBUFFERED"] = "1"
        env.pop("OPENENV_DIE_WITH_PARENT", None)
        if not spec.options.get("detach"):
            # `openenv serve` asks for SIGTERM when its own parent dies: with `uv run` in between,
            # the server's parent is uv, which our PR_SET_PDEATHSIG covers but may not forward.
            env["OPENENV_DIE_WITH_PARENT"] = "1"
        return env

    def listen_socket(self, spec: LaunchSpec) -> socket.socket | None:
        """A listening socket for the child to serve on (``openenv serve --fd``), bound here; it is
        closed here once the child holds it. ``None`` (the default): the child binds its own port."""
        return None

    def ready_path(self, server_id: str) -> Path:
        """Where the child writes its ready file (a folder the child can write to)."""
        return state_dir() / f"{server_id}.ready"

    def check(self, spec: LaunchSpec) -> None:
        """Refuse bad specs before anything starts (override to add checks)."""
        unknown = set(spec.options) - COMMON_OPTIONS - self.options
        if unknown:
            from openenv.errors import ConfigError, did_you_mean

            known = sorted(COMMON_OPTIONS | self.options)
            name = sorted(unknown)[0]
            raise ConfigError(
                f"Unknown option '{name}' for provider '{self.name}'.{did_you_mean(name, known)} "
                f"Accepted options: {', '.join(known)}."
            )
        probe = spec.options.get("probe", "auto")
        if probe not in MODES:
            from openenv.errors import ConfigError

            raise ConfigError(f"Unknown probe mode {probe!r} (options['probe']): use one of "
                              f"{', '.join(MODES)}.")
        if spec.max_sessions is not None and spec.max_sessions < 1:
            from openenv.errors import ConfigError

            raise ConfigError(f"max_sessions must be at least 1, got {spec.max_sessions}.")

    def start(self, spec: LaunchSpec) -> ProcessHandle:
        self.check(spec)
        server_id = f"{self.name}-{uuid.uuid4().hex[:12]}"
        directory = state_dir()
        log_path = directory / f"{server_id}.log"
        ready_file = self.ready_path(server_id)
        serve_args = self.serve_args(spec, ready_file)
        listener = self.listen_socket(spec)
        fds = () if listener is None else (listener.fileno(),)
        if listener is not None:
            serve_args += ["--fd", str(listener.fileno())]
        log_file = open(log_path, "wb")  # noqa: SIM115 - owned by the handle, closed at stop
        try:
            argv = self.command(spec, serve_args)
            popen = spawn(argv, env=self.child_environment(spec), log=log_file,
                          cwd=spec.options.get("cwd"),
                          die_with_parent=not spec.options.get("detach", False), pass_fds=fds)
        except BaseException:
            log_file.close()
            with contextlib.suppress(OSError):
                log_path.unlink()
            _remove_scratch(server_id)
            raise
        finally:
            if listener is not None:
                listener.close()  # the child holds its own copy: the port lives as long as the server
        st = proc_stat(popen.pid)
        record = Record(
            id=server_id, provider=self.name, pid=popen.pid, pgid=popen.pid, owner=owner_id(),
            env=spec.env, log=str(log_path), start_ticks=st.start_ticks if st else None,
            created_at=time.time(),
        )
        deadline = time.monotonic() + spec.startup_timeout_s
        try:
            write_record(record)
            base_url = await_address(popen, ready_file, log_file, str(log_path), deadline=deadline,
                                     timeout_s=spec.startup_timeout_s,
                                     what=f"env server '{spec.env}'")
        except BaseException:
            # No handle yet: clean up here. Keep the log: the error message points to it.
            emptied = kill_group(popen.pid, grace_s=2.0, popen=popen)
            with contextlib.suppress(OSError):
                log_file.close()
            if emptied:  # else the record stays, for `gc` to retry
                _forget(record, keep_log=True)
            raise
        record.base_url = base_url
        handle = ProcessHandle(
            self.name, record, popen, log_file, base_url=base_url, token=spec.token,
            probe_mode=str(spec.options.get("probe", "auto")),
            keep_logs=bool(spec.options.get("keep_logs", False)),
        )
        try:
            write_record(record)
            handle.wait_ready(max(0.0, deadline - time.monotonic()))
        except BaseException:
            # Keep the log around when start-up failed: the error message points to it.
            handle._keep_logs = True
            handle.stop(timeout_s=2.0)
            raise
        log.info("started %s for env %s at %s (pid %d)", server_id, spec.env, handle.base_url, popen.pid)
        return handle

    def serve_args(self, spec: LaunchSpec, ready_file: Path) -> list[str]:
        """Arguments after ``openenv serve``: never a secret (those go through the environment)."""
        opts = spec.options
        args = [spec.env, "--host", "127.0.0.1", "--port", "0", "--ready-file", str(ready_file),
                *spec.max_sessions_args(), "--mode", spec.mode]
        transports = opts.get("transports")
        if transports:
            for t in [transports] if isinstance(transports, str) else transports:
                args += ["--transport", str(t)]
        if opts.get("step_timeout_s") is not None:
            args += ["--step-timeout", str(float(opts["step_timeout_s"]))]
        if opts.get("idle_timeout_s") is not None:
            args += ["--idle-timeout", str(float(opts["idle_timeout_s"]))]
        args += ["--log-level", str(opts.get("log_level", "info"))]
        return args

    # -- bookkeeping ------------------------------------------------------------------------------

    def ps(self, *, all_owners: bool = False) -> HandleInfos:
        me = owner_id()
        infos = []
        for record in read_records(self.name):
            if not record.process_alive():
                _forget(record)  # stale: the server is gone
                continue
            if not all_owners and record.owner != me:
                continue
            status = "running" if owner_alive(record.owner) else "orphaned"
            infos.append(_info(record, status))
        return infos

    def gc(self) -> HandleInfos:
        removed = []
        for record in read_records(self.name):
            if not record.process_alive():
                _forget(record)
                removed.append(_info(record, "stale"))
            elif not owner_alive(record.owner):
                if kill_group(record.pgid, grace_s=5.0):
                    _forget(record)
                    removed.append(_info(record, "orphaned"))
                else:
                    log.warning("gc: process group %d of %s would not die", record.pgid, record.id)
        _sweep_leftover_files(self.name)
        return removed


#: Logs of failed starts are kept for the user to read; ``gc`` removes them after this long.
LEFTOVER_TTL_S = 24 * 3600.0


def _sweep_leftover_files(provider: str) -> None:
    """Remove this provider's logs and ready files that no record refers to, once old enough."""
    directory = state_dir()
    live = {r.id for r in read_records()}
    cutoff = time.time() - LEFTOVER_TTL_S
    for path in directory.glob(f"{provider}-*"):
        server_id = path.name.split(".", 1)[0]
        if server_id in live or path.suffix == ".json":
            continue
        with contextlib.suppress(OSError):
            if path.stat().st_mtime < cutoff:
                path.unlink()


def _info(record: Record, status: str) -> HandleInfo:
    return HandleInfo(provider=record.provider, id=record.id, owner=record.owner,
                      base_url=record.base_url, status=status, env=record.env)


def _forget(record: Record, *, keep_log: bool = False) -> None:
    """Remove a server's record, ready file and (unless ``keep_log``) log."""
    delete_record(record.id)
    paths = [str(state_dir() / f"{record.id}.ready")]
    if record.log and not keep_log:
        paths.append(record.log)
    for path in paths:
        with contextlib.suppress(OSError):
            os.unlink(path)
    _remove_scratch(record.id)


def _remove_scratch(server_id: str) -> None:
    """Remove a server's scratch folder (``<id>.d``: what a sandboxed child may write, e.g. its
    ready file), if its provider made one."""
    shutil.rmtree(state_dir() / f"{server_id}.d", ignore_errors=True)
