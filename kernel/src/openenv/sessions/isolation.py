"""Process isolation: one session's env in a worker process of its own (``isolation="process"``).

``ProcessEnv`` stands in for the env on the server: ``reset``/``step``/``state``/``close`` are sent
over a pipe (pickled) to a spawned worker that built the env with the server's factory. A call that
overruns its deadline is ended by killing the worker, so a hung or crashing env (a C extension that
deadlocks, ``os._exit``, a segfault) costs only its own session, and the exit is reported with the
session's name. The price: a process start per session (spawn, ~0.3-1 s) and a pickle round trip per
call, so use it for untrusted or unreliable envs, not for fast, well-behaved ones.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import multiprocessing
import os
import pickle
import signal
import sys
import threading
from typing import Any

from openenv.errors import ExecutionError

__all__ = ["ProcessEnv", "check_picklable"]

log = logging.getLogger("openenv.sessions")

_ASYNC_NAMES = {"reset", "step", "close"}


def check_picklable(factory: Any, env_name: str) -> None:
    """Raise ``ConfigError`` if ``factory`` cannot be sent to a worker process."""
    from openenv.errors import ConfigError

    try:
        pickle.dumps(factory)
    except Exception as exc:
        raise ConfigError(
            f"isolation='process' needs an env factory a worker process can import, but "
            f"'{env_name}' cannot be pickled ({type(exc).__name__}: {exc}). Serve a class or a "
            "module-level function (e.g. 'pkg.mod:MyEnv'), or use isolation='thread'.") from None


class ProcessEnv:
    """The server-side handle of an env living in a worker process. Calls block (run them off the
    event loop); ``kill`` ends the worker at once."""

    def __init__(self, factory: Any, name: str) -> None:
        self.name = name
        self._factory = factory
        self._proc: Any = None
        self._conn: Any = None
        self._killed = False
        # ``kill`` (on the loop) and ``_gone`` (on the session's thread, woken by the worker's end)
        # both reap the worker: multiprocessing's reaping is not thread-safe (the loser of two
        # concurrent waitpid calls reports the process still alive), so they take turns.
        self._reaping = threading.Lock()

    @property
    def pid(self) -> int | None:
        return None if self._proc is None else self._proc.pid

    def start(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        parent, child = ctx.Pipe()
        self._proc = ctx.Process(target=_worker, args=(child, self._factory, os.getpid()),
                                 name=self.name, daemon=True)
        self._proc.start()
        child.close()
        self._conn = parent
        self._call("__init__")

    def reset(self, *args: Any, **kw: Any) -> Any:
        return self._call("reset", args, kw)

    def step(self, *args: Any, **kw: Any) -> Any:
        return self._call("step", args, kw)

    @property
    def state(self) -> Any:
        return self._call("state")

    def snapshot(self) -> Any:
        return self._call("snapshot")

    def restore(self, *args: Any, **kw: Any) -> Any:
        return self._call("restore", args, kw)

    def close(self) -> None:
        try:
            self._call("close")
        finally:
            self.kill()

    def kill(self) -> None:
        self._killed = True
        proc = self._proc
        with self._reaping:
            if proc is not None and proc.is_alive():
                proc.kill()
                proc.join(2)
        if self._conn is not None:
            self._conn.close()

    def _call(self, name: str, args: tuple[Any, ...] = (), kw: dict[str, Any] | None = None) -> Any:
        try:
            if name != "__init__":
                self._conn.send((name, args, kw or {}))
            ok, value = self._conn.recv()
        except (EOFError, OSError, BrokenPipeError):
            raise self._gone(name) from None
        if ok:
            return value
        raise value

    def _gone(self, name: str) -> ExecutionError:
        proc = self._proc
        if proc is not None:
            with self._reaping:
                proc.join(1)
        code = None if proc is None else proc.exitcode
        if self._killed:
            return ExecutionError(f"{name} did not finish: the env's worker process was stopped",
                                  data={"exitcode": code})
        how = (f"was killed by signal {-code}" if code is not None and code < 0
               else f"exited with code {code}")
        log.error("env worker process %s (pid %s) %s during %s", self.name, self.pid, how, name)
        return ExecutionError(f"The env's worker process {how} during {name}; the session's env is "
                              "gone: open a new session.", data={"exitcode": code})


def _worker(conn: Any, factory: Any, parent_pid: int) -> None:  # pragma: no cover - child process
    _die_with_parent(parent_pid)
    try:
        env = factory()
    except BaseException as exc:
        _reply(conn, False, exc)
        return
    _reply(conn, True, None)
    is_async = bool(getattr(env, "is_async", None) and callable(env.is_async) and env.is_async())
    loop = asyncio.new_event_loop()
    while True:
        try:
            name, args, kw = conn.recv()
        except (EOFError, OSError):
            return
        try:
            if name == "state":
                value = env.state
            else:
                fn = getattr(env, name + "_async", None) if is_async and name in _ASYNC_NAMES else None
                value = (fn or getattr(env, name))(*args, **kw)
                if inspect.isawaitable(value):
                    value = loop.run_until_complete(value)
        except BaseException as exc:
            _reply(conn, False, exc)
        else:
            _reply(conn, True, value)
        if name == "close":
            return


def _reply(conn: Any, ok: bool, value: Any) -> None:  # pragma: no cover - child process
    try:
        conn.send((ok, value))
    except Exception as exc:  # an unpicklable result or exception: say what it was
        what = "result" if ok else f"exception {type(value).__name__}: {value}"
        conn.send((False, ExecutionError(f"the env's {what} could not be sent back from its worker "
                                         f"process ({type(exc).__name__}: {exc})")))


def _die_with_parent(parent_pid: int) -> None:  # pragma: no cover - child process
    """The worker dies with the server: ``PR_SET_PDEATHSIG`` on Linux, else a parent-pid check."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except Exception:
            pass
    if os.getppid() != parent_pid:
        os._exit(1)
