"""Where one session's env code runs: the ``Runner`` and the per-session env thread.

Placement (chosen by ``make_runner`` from the env's traits and the server's isolation mode):

* ``async`` — an async env is awaited on the event loop; a timed-out call is cancelled.
* ``inline`` — a sync env declaring ``BLOCKING = False`` runs on the loop itself (no timeout can
  interrupt it: it must never block).
* ``thread`` — any other sync env runs on a thread of its own session (``EnvThread``): a hung call
  stalls only that session, never a pool shared with others. ``REQUIRES_SINGLE_THREAD_EXECUTOR``
  envs share one such thread, as they ask.
* ``process`` — with ``isolation="process"`` the env lives in a worker process of its own
  (``openenv.sessions.isolation``), driven from the session's thread and killed when abandoned.

A call still running when its deadline passes cannot be stopped inside a thread: the runner is then
*abandoned* (``abandon``) — its thread is left to finish on its own (a daemon thread, so it never
holds up the process's exit), every waiter is woken with an error and nothing enters the env again.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import queue
import threading
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from openenv.errors import SessionError

if TYPE_CHECKING:
    from openenv.sessions.session import Session

__all__ = ["EnvThread", "Runner", "abandon_env", "close_env", "culprit_name", "make_runner"]

log = logging.getLogger("openenv.sessions")

_STOP = object()


class EnvThread:
    """One daemon thread running submitted calls in order (an executor that can be abandoned).

    Unlike a ``ThreadPoolExecutor`` its thread is a daemon and is never joined at interpreter exit,
    so a hung env call cannot hold the server's shutdown.

    A call's outcome goes straight to an asyncio future of the caller's loop, by one
    ``call_soon_threadsafe``, and its deadline is one timer on that future: no
    ``concurrent.futures.Future`` + ``wrap_future`` + ``wait_for`` chain, whose extra futures,
    callbacks and loop passes made the hop cost ~2.9x the CPU (``python -m bench.envhop``). Every
    blocking session's step pays the hop on the one event loop serving all sessions, so it is
    also what each other session's step costs a bystander.
    """

    def __init__(self, name: str, culprit: str | None = None) -> None:
        self.name = name
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._current: asyncio.Future[Any] | None = None
        self._abandoned: str | None = None
        target = self._work if culprit is None else _frame_named(self._work, culprit)
        self._thread = threading.Thread(target=target, name=name, daemon=True)
        self._thread.start()

    @property
    def busy(self) -> bool:
        return self._current is not None

    def submit(self, loop: asyncio.AbstractEventLoop, fn: Callable[[], Any]) -> asyncio.Future[Any]:
        """Queue ``fn()``; the returned future (of ``loop``, called from it) gets its outcome. A call
        whose future is already done (cancelled, timed out) when its turn comes is skipped."""
        fut: asyncio.Future[Any] = loop.create_future()
        if self._abandoned is not None:
            fut.set_exception(SessionError(self._abandoned))
            return fut
        self._queue.put((loop, fut, fn))
        return fut

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is _STOP:
                return
            loop, fut, fn = item
            # Read off the loop's thread: at worst a future settled just now is run anyway, and
            # its late outcome dropped (``_settle``), as a call already running when cancelled.
            if fut.done():
                continue
            self._current = fut
            try:
                result = fn()
            except BaseException as exc:  # handed to the waiter, whatever it is
                self._current = None  # before the waiter wakes: it may look at ``busy``
                _wake(loop, fut, exc=exc)
            else:
                self._current = None
                _wake(loop, fut, result=result)
            if self._abandoned is not None:
                return

    def abandon(self, reason: str) -> None:
        """Wake every waiter with ``SessionError(reason)``; the thread exits once its call returns.
        Called on the loop's thread."""
        self._abandoned = reason
        current = self._current
        if current is not None:
            _settle(current, exc=SessionError(reason))
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is not _STOP:
                _settle(item[1], exc=SessionError(reason))
        self._queue.put(_STOP)

    def shutdown(self) -> None:
        self._queue.put(_STOP)


def _settle(fut: asyncio.Future[Any], result: Any = None, exc: BaseException | None = None) -> None:
    """On the future's loop: settle ``fut`` unless already settled (by ``abandon``, a timeout or a
    cancelled caller: the late outcome is dropped)."""
    if fut.done():
        return
    if exc is None:
        fut.set_result(result)
    elif isinstance(exc, StopIteration):  # a future refuses it (it means "generator finished")
        fut.set_exception(RuntimeError(f"the env call raised StopIteration: {exc!r}"))
    else:
        fut.set_exception(exc)


def _wake(loop: asyncio.AbstractEventLoop, fut: asyncio.Future[Any], *, result: Any = None,
          exc: BaseException | None = None) -> None:
    """From an env thread: settle ``fut`` on its loop. A loop already closed (the server stopped
    while this call hung) has no one left to tell."""
    try:
        loop.call_soon_threadsafe(_settle, fut, result, exc)
    except RuntimeError:
        pass


def _expire(fut: asyncio.Future[Any]) -> None:
    if not fut.done():
        fut.set_exception(TimeoutError())


class Runner:
    """How one session's env code is executed (see the module docstring)."""

    __slots__ = ("abandoned", "executor", "kind", "loop", "owns_executor", "worker")

    def __init__(self, kind: str, executor: EnvThread | None, owns_executor: bool) -> None:
        self.kind = kind  # "async" | "inline" | "thread" | "process"
        self.executor = executor
        self.owns_executor = owns_executor
        self.loop = asyncio.get_running_loop()
        #: The env's worker process handle (``isolation.ProcessEnv``) in ``process`` placement.
        self.worker: Any = None
        #: Why the runner was abandoned (``None`` while usable).
        self.abandoned: str | None = None

    @property
    def off_loop(self) -> bool:
        """Whether calls run on a thread (and so can outlive their deadline)."""
        return self.kind in ("thread", "process")

    async def call(self, fn: Callable[..., Any], *args: Any, timeout: float | None = None, **kw: Any) -> Any:
        if self.abandoned is not None:
            raise SessionError(self.abandoned)
        if self.executor is not None:
            fut = self.executor.submit(self.loop, partial(fn, *args, **kw) if args or kw else fn)
            if timeout is None:
                return await fut
            # A timer on the future itself, not ``wait_for``'s wrapper (see ``EnvThread``).
            timer = self.loop.call_later(timeout, _expire, fut)
            try:
                return await fut
            finally:
                timer.cancel()
        result = fn(*args, **kw)
        if inspect.isawaitable(result):
            if timeout is None:
                return await result
            return await asyncio.wait_for(result, timeout)
        return result

    async def create(self, factory: Callable[[], Any], timeout: float | None) -> Any:
        """Build the env with ``factory`` where its calls will run (in its worker process for
        ``process`` placement)."""
        if self.kind != "process":
            return await self.call(factory, timeout=timeout)
        from openenv.sessions.isolation import ProcessEnv

        self.worker = ProcessEnv(factory, name=self.executor.name if self.executor else "openenv-env")
        await self.call(self.worker.start, timeout=timeout)
        return self.worker

    def abandon(self, reason: str) -> None:
        """Stop using this runner: wake waiters with ``reason``, kill a worker process, leave a
        thread to finish alone. Nothing enters the env through this runner again."""
        if self.abandoned is not None:
            return
        self.abandoned = reason
        if self.worker is not None:
            self.worker.kill()
        if self.executor is not None:  # a shared single thread too: it is hung for everyone
            self.executor.abandon(reason)

    def shutdown(self) -> None:
        if self.worker is not None:
            self.worker.kill()
        if self.owns_executor and self.executor is not None:
            self.executor.shutdown()


def _frame_named(fn: Callable[[], None], name: str) -> Callable[[], None]:
    """``fn`` called from a frame whose function is called ``name``.

    A fatal signal (a segfault in an env's C extension) leaves nothing but ``faulthandler``'s dump
    of every thread's stack, which shows function names and not thread names: the bottom frame of
    each env thread is named after its session and env, so the dump says which one crashed.
    """
    def run() -> None:
        fn()

    code = run.__code__.replace(co_name=name)
    if hasattr(code, "co_qualname"):
        code = code.replace(co_qualname=name)
    run.__code__ = code
    return run


def culprit_name(session_id: str, env_name: str | None) -> str:
    """``openenv_session_<id>_env_<name>``: the env thread's bottom frame (``_frame_named``)."""
    def clean(text: str) -> str:
        return "".join(c if c.isalnum() else "_" for c in text)

    return f"openenv_session_{clean(session_id)}_env_{clean(env_name or 'unknown')}"


def make_runner(session_id: str, *, env_name: str, traits: dict[str, bool], isolation: str, is_async: bool,
                shared_thread: Callable[[], EnvThread]) -> Runner:
    """The runner for a new session (the env's ``traits``, the server's ``isolation``);
    ``shared_thread`` gives the one thread ``REQUIRES_SINGLE_THREAD_EXECUTOR`` envs share."""
    label = f"openenv-session-{session_id[:8]}"
    if isolation == "process":
        return Runner("process", EnvThread(label, culprit_name(session_id, env_name)), True)
    if is_async:
        return Runner("async", None, False)
    if traits["REQUIRES_SINGLE_THREAD_EXECUTOR"]:
        return Runner("thread", shared_thread(), False)
    if not traits["BLOCKING"] and not traits["THREAD_AFFINITY"]:
        return Runner("inline", None, False)
    return Runner("thread", EnvThread(label, culprit_name(session_id, env_name)), True)


def abandon_env(session: Session, env_name: str, why: str) -> None:
    """Abandon ``session``'s runner (see ``Runner.abandon``), with a log line naming session and env."""
    runner = session.runner
    if runner is None:
        return
    worker = runner.executor.name if runner.executor is not None else runner.kind
    log.error("session %s (env %s): %s; abandoned its env without close() (worker %s)",
              session.id, env_name, why, worker)
    runner.abandon(session.failed or f"Session {session.id} failed: {why}. Open a new session.")


async def close_env(session: Session, env_name: str, grace: float, reason: str) -> None:
    """Run ``session``'s ``env.close()`` without ever waiting behind a hung call: a call still
    running in the env (one whose caller is gone included) gets ``grace`` seconds in all to finish
    before ``close()`` runs after it; past that (or when ``close()`` itself overruns what is left)
    the env is abandoned instead."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace
    try:
        await asyncio.wait_for(session._lock.acquire(), grace)
    except TimeoutError:
        abandon_env(session, env_name, f"closed ({reason}) while a call was still running in its env")
        return
    try:
        env, runner = session.env, session.runner
        if env is not None and runner is not None:
            closer = getattr(env, "close_async", None) if runner.kind == "async" else None
            left = max(deadline - loop.time(), 0.0)
            try:
                # On a thread, close() queues behind a call still running there (a cancelled one):
                # the deadline covers both.
                await runner.call(closer or env.close, timeout=left)
            except TimeoutError:
                busy = runner.executor is not None and runner.executor.busy
                abandon_env(session, env_name, f"closed ({reason}) while a call was still running in its env"
                            if busy else f"env.close() did not return within {grace} seconds")
            except Exception:
                log.exception("env.close() raised for session %s", session.id)
    finally:
        session._lock.release()
