"""The transport-independent session manager.

One ``SessionManager`` per served env. Transports only translate frames into calls here:

* **Capacity with reservation.** A slot is reserved (under the event loop, so atomically) before
  the env is built; concurrent connects can never overshoot ``max_sessions``. A slot is released
  only after the env's ``close()`` has run.
* **Execution.** Async envs are awaited on the event loop (no thread hop). Sync envs with
  ``BLOCKING = False`` run inline. Other sync envs run on a small shared pool, or, when they declare
  ``THREAD_AFFINITY``, on a dedicated thread per session that creates, steps and closes the env;
  ``REQUIRES_SINGLE_THREAD_EXECUTOR`` envs share one thread.
* **Timeouts.** ``step_timeout_s`` bounds each reset/step/state that runs off the loop or is async.
* **Idle reaping.** Sessions with no live connection expire after ``idle_timeout_s``; a session with
  a connection is never reaped (dead connections are found by the transport's pings).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import Any

from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from openenv.env import env_class_of, env_traits
from openenv.errors import (
    CapacityError,
    ExecutionError,
    FactoryError,
    SessionError,
    ValidationError,
)
from openenv.events import LifecycleEvent, event_for
from openenv.types import Action, Observation
from openenv.wire import validation_errors

__all__ = ["Session", "SessionManager"]

log = logging.getLogger("openenv.sessions")

_MAX_EPISODE_ID = 255


class _Runner:
    """How one session's env code is executed (see module docstring)."""

    __slots__ = ("executor", "kind", "loop", "owns_executor")

    def __init__(self, kind: str, executor: ThreadPoolExecutor | None, owns_executor: bool) -> None:
        self.kind = kind  # "async" | "inline" | "thread"
        self.executor = executor
        self.owns_executor = owns_executor
        self.loop = asyncio.get_running_loop()

    async def call(self, fn: Callable[..., Any], *args: Any, timeout: float | None = None, **kw: Any) -> Any:
        if self.kind == "thread":
            fut = self.loop.run_in_executor(self.executor, partial(fn, *args, **kw))
            if timeout is None:
                return await fut
            return await asyncio.wait_for(fut, timeout)
        result = fn(*args, **kw)
        if inspect.isawaitable(result):
            if timeout is None:
                return await result
            return await asyncio.wait_for(result, timeout)
        return result

    def shutdown(self) -> None:
        if self.owns_executor and self.executor is not None:
            self.executor.shutdown(wait=False)


class Session:
    """One live env instance and its bookkeeping."""

    __slots__ = (
        "_close_requested", "_closed", "_lock", "connections", "created_at", "env", "id",
        "last_activity", "owner", "ready", "runner", "step_count", "transport",
    )

    def __init__(self, session_id: str, owner: str | None, transport: str) -> None:
        self.id = session_id
        self.owner = owner
        self.transport = transport
        self.env: Any = None
        self.runner: _Runner | None = None
        self.created_at = time.time()
        self.last_activity = time.monotonic()
        self.connections = 0
        self.step_count = 0
        self.ready = False
        self._lock = asyncio.Lock()
        self._close_requested = False
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def info(self) -> dict[str, Any]:
        return {
            "session_id": self.id,
            "created_at": self.created_at,
            "idle_s": round(time.monotonic() - self.last_activity, 3),
            "connections": self.connections,
            "step_count": self.step_count,
            "transport": self.transport,
        }


class SessionManager:
    """Creates, runs and destroys sessions for one env factory."""

    def __init__(
        self,
        factory: Callable[[], Any],
        *,
        env_name: str | None = None,
        max_sessions: int = 1,
        step_timeout_s: float | None = None,
        idle_timeout_s: float | None = 300.0,
        mode: str = "simulation",
        pool_size: int = 4,
        action_type: type[Action] | None = None,
        notify: Callable[[str, LifecycleEvent], None] | None = None,
    ) -> None:
        self.factory = factory
        self.env_name = env_name or getattr(factory, "__name__", type(factory).__name__)
        self.max_sessions = max_sessions
        self.step_timeout_s = step_timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.mode = mode
        cls = env_class_of(factory)
        self.env_class = cls
        self.traits = env_traits(factory)
        self.action_type: type[Action] = action_type or getattr(cls, "action_type", None) or Action
        self.is_async = bool(cls is not None and hasattr(cls, "is_async") and cls.is_async())
        self._notify = notify
        self._sessions: dict[str, Session] = {}
        self._pool_size = pool_size
        self._pool: ThreadPoolExecutor | None = None
        self._single: ThreadPoolExecutor | None = None
        self._reaper: asyncio.Task[None] | None = None
        self._closing_tasks: set[asyncio.Task[Any]] = set()
        self._reset_params, self._reset_var_kw = _signature_params(
            cls, "reset_async" if self.is_async else "reset"
        )
        self._warned_keys: set[str] = set()
        self._action_adapter: Callable[[dict[str, Any]], Action] | None = None
        # model_validate minus its Python wrapper, unless the action class customises it.
        base_validate = getattr(BaseModel.model_validate, "__func__", None)
        custom = getattr(self.action_type.model_validate, "__func__", None) is not base_validate
        self._validate = (self.action_type.model_validate if custom
                          else self.action_type.__pydantic_validator__.validate_python)

    # -- bookkeeping ------------------------------------------------------------------------------

    @property
    def active(self) -> int:
        """Sessions counted against capacity (including ones still being built or closed)."""
        return len(self._sessions)

    def sessions(self) -> list[Session]:
        return list(self._sessions.values())

    def get(self, session_id: str) -> Session:
        """Look a session up; ``SessionError`` with upstream's message if unknown or not ready."""
        session = self._sessions.get(session_id)
        if session is None or session._closed:
            raise SessionError(f"Unknown session_id: {session_id}")
        if not session.ready:
            raise SessionError(f"Session {session_id} is still initializing")
        return session

    def set_action_adapter(self, adapter: Callable[[dict[str, Any]], Action] | None) -> None:
        """Replace action validation (e.g. the MCP dispatch of spec §2.5)."""
        self._action_adapter = adapter

    # -- lifecycle --------------------------------------------------------------------------------

    async def open(self, *, owner: str | None = None, transport: str = "ws") -> Session:
        """Reserve a slot, build the env, return the ready session.

        Raises ``CapacityError`` when full and ``FactoryError`` when the factory raises; in both
        cases nothing is left behind.
        """
        if len(self._sessions) >= self.max_sessions:
            active = len(self._sessions)
            raise CapacityError(
                f"Server at capacity: {active}/{self.max_sessions} sessions active. "
                "Cannot accept new connections.",
                data={"active_sessions": active, "max_sessions": self.max_sessions},
            )
        session = Session(str(uuid.uuid4()), owner, transport)
        self._sessions[session.id] = session  # the reservation
        try:
            session.runner = self._make_runner(session)
            session.env = await session.runner.call(self.factory)
            if hasattr(session.env, "mode"):
                try:
                    session.env.mode = self.mode
                except Exception:  # a read-only property; the env chose its own mode
                    pass
        except BaseException as exc:
            self._sessions.pop(session.id, None)
            if session.runner is not None:
                session.runner.shutdown()
            session._closed = True
            if isinstance(exc, Exception):
                log.warning("env factory %s failed: %r", self.env_name, exc)
                raise FactoryError(
                    f"Environment factory '{self.env_name}' failed to create instance.",
                    data={"factory_name": self.env_name, "detail": f"{type(exc).__name__}: {exc}"},
                ) from exc
            raise
        session.ready = True
        self._emit("openenv_session_opened", session, active_sessions=len(self._sessions))
        return session

    def _make_runner(self, session: Session) -> _Runner:
        if self.is_async:
            return _Runner("async", None, False)
        if self.traits["REQUIRES_SINGLE_THREAD_EXECUTOR"]:
            if self._single is None:
                self._single = ThreadPoolExecutor(1, thread_name_prefix="openenv-env")
            return _Runner("thread", self._single, False)
        if self.traits["THREAD_AFFINITY"]:
            ex = ThreadPoolExecutor(1, thread_name_prefix=f"openenv-session-{session.id[:8]}")
            return _Runner("thread", ex, True)
        if not self.traits["BLOCKING"]:
            return _Runner("inline", None, False)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self._pool_size, thread_name_prefix="openenv-pool")
        return _Runner("thread", self._pool, False)

    async def close(self, session: Session, reason: str = "closed") -> None:
        """Close the env (on its own thread) and free the slot. Idempotent."""
        if session._closed:
            return
        session._closed = True
        try:
            async with session._lock:  # wait for an in-flight operation to finish first
                env, runner = session.env, session.runner
                if env is not None and runner is not None:
                    closer = getattr(env, "close_async", None) if runner.kind == "async" else None
                    try:
                        if closer is not None:
                            await runner.call(closer, timeout=self.step_timeout_s)
                        else:
                            await runner.call(env.close, timeout=self.step_timeout_s)
                    except Exception:
                        log.exception("env.close() raised for session %s", session.id)
        finally:
            if session.runner is not None:
                session.runner.shutdown()
            session.env = None
            self._sessions.pop(session.id, None)
            self._emit("openenv_session_closed", session, reason=reason, steps=session.step_count,
                       active_sessions=len(self._sessions))

    def close_soon(self, session: Session, reason: str) -> None:
        """Schedule ``close`` without waiting (used when a connection drops mid-operation)."""
        task = asyncio.get_running_loop().create_task(self.close(session, reason))
        self._closing_tasks.add(task)
        task.add_done_callback(self._closing_tasks.discard)

    # -- attach/detach (connections) --------------------------------------------------------------

    def attach(self, session_id: str, *, exclusive: bool = True, principal: str | None = None) -> Session:
        """Mark a connection on an existing session (``/ws?session_id=``).

        A session that has an owner can only be attached by that principal; anyone else is told
        the id is unknown, which reveals nothing about other callers' sessions (spec §11 B16).
        """
        session = self.get(session_id)
        if session.owner is not None and principal != session.owner:
            raise SessionError(f"Unknown session_id: {session_id}")
        if exclusive and session.connections:
            raise SessionError(f"Session {session_id} already has an attached WebSocket")
        session.connections += 1
        session.last_activity = time.monotonic()
        return session

    async def detach(self, session: Session) -> None:
        session.connections = max(0, session.connections - 1)
        session.last_activity = time.monotonic()
        if session._close_requested and not session.connections:
            await self.close(session, "closed at detach")

    async def request_close(self, session: Session, reason: str = "closed") -> bool:
        """Close now if no connection is attached, else at detach. Returns True if closed now."""
        if session.connections:
            session._close_requested = True
            return False
        await self.close(session, reason)
        return True

    # -- the protocol -----------------------------------------------------------------------------

    def validate_action(self, data: Any) -> Action:
        """Validate an action object; ``ValidationError`` with ``errors`` relative to the action."""
        if self._action_adapter is not None:
            return self._action_adapter(data)
        try:
            return self._validate(data)
        except PydanticValidationError as exc:
            raise _invalid_action(exc) from None

    def reset_kwargs(self, data: dict[str, Any]) -> dict[str, Any]:
        """Validate ``seed``/``episode_id`` and drop keys ``reset`` does not take (spec §3.3, B21)."""
        errors = []
        seed = data.get("seed")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
            if isinstance(seed, int) and not isinstance(seed, bool):
                errors.append({"type": "greater_than_equal", "loc": ["seed"], "msg":
                               "Input should be greater than or equal to 0", "input": seed, "ctx": {"ge": 0}})
            else:
                errors.append({"type": "int_type", "loc": ["seed"], "msg":
                               "Input should be a valid integer", "input": seed})
        episode_id = data.get("episode_id")
        if episode_id is not None and (not isinstance(episode_id, str) or len(episode_id) > _MAX_EPISODE_ID):
            errors.append({"type": "string_type" if not isinstance(episode_id, str) else "string_too_long",
                           "loc": ["episode_id"], "msg": "Input should be a string of at most 255 characters",
                           "input": episode_id})
        if errors:
            raise ValidationError("Invalid message", data={"errors": errors})
        if self._reset_var_kw:
            return data
        kwargs = {}
        for key, value in data.items():
            if key in self._reset_params:
                kwargs[key] = value
            elif key not in self._warned_keys:
                self._warned_keys.add(key)
                log.info("reset argument %r is not accepted by %s.reset; dropped", key, self.env_name)
        return kwargs

    async def reset(self, session: Session, data: dict[str, Any] | None = None) -> Observation:
        kwargs = self.reset_kwargs(data or {})
        async with session._lock:
            self._check_usable(session)
            session.last_activity = time.monotonic()
            env = session.env
            fn = env.reset_async if session.runner.kind == "async" else env.reset  # type: ignore[union-attr]
            obs = await self._run(session, fn, "reset", **kwargs)
            session.step_count = 0
            return obs

    async def step(self, session: Session, data: Any, kwargs: dict[str, Any] | None = None) -> Observation:
        runner = session.runner
        if runner is not None and runner.kind == "inline" and not session._lock.locked():
            obs = self._step_inline(session, self.validate_action(data), kwargs)
            if not isinstance(obs, Observation):
                obs = await self._settle_inline(session, obs)
            session.step_count += 1
            return obs
        return await self._step_locked(session, self.validate_action(data), kwargs)

    async def step_batch(self, session: Session, actions: list[Any],
                         convert: Callable[[Observation], Any] | None = None) -> tuple[list[Any], Exception | None]:
        """Run ``actions`` in order, as that many ``step`` calls; stop after the first ``done`` or error.

        Returns the observations (each passed through ``convert`` if given, e.g. to its wire
        payload; an exception there stops the batch like a failed step) and the error that
        stopped the batch (``None`` if none did). An error leaves the session exactly as a failed
        ``step`` does. For an env that runs inline the whole batch runs without yielding to the
        event loop: a frame's worth of steps costs one pass through the transport, not one each.
        """
        out: list[Any] = []
        runner = session.runner
        inline = runner is not None and runner.kind == "inline"
        # An inline env's steps run back to back on the loop: _step_inline unrolled into the loop
        # (the per-step calls it saves are a tenth of a batched step's cost).
        validate = self._validate if self._action_adapter is None else self.validate_action
        session.last_activity = time.monotonic()
        for data in actions:
            try:
                try:
                    action = validate(data)
                except PydanticValidationError as exc:
                    raise _invalid_action(exc) from None
                if not inline or session._lock.locked():  # locked: an await below let a reset in
                    obs = await self._step_locked(session, action, None)
                else:
                    if session._closed or session.env is None:
                        raise SessionError("Session environment not initialized for websocket")
                    try:
                        obs = session.env.step(action)
                    except (ValidationError, SessionError):
                        raise
                    except Exception as exc:
                        raise _env_error(exc) from exc
                    if not isinstance(obs, Observation):
                        obs = await self._settle_inline(session, obs)
                    session.step_count += 1
                out.append(obs if convert is None else convert(obs))
            except Exception as exc:
                return out, exc
            if obs.done:
                break
        return out, None

    async def step_many(self, items: list[tuple[Session, Any]],
                        convert: Callable[[Observation], Any] | None = None) -> list[Any]:
        """One step in each of several sessions (``(session, action data)`` pairs), independently.

        Returns one element per item, in order: the observation (passed through ``convert`` if
        given) or the exception that step raised; a failure never stops the others. Steps of
        inline envs run back to back on the loop; otherwise the steps run concurrently, each
        where its session runs env code (a session named twice still runs its steps in order).
        """
        if all(s.runner is not None and s.runner.kind == "inline" for s, _ in items):
            # Nothing to overlap: each step runs to completion on the loop, so no tasks either.
            return [await self._step_or_error(s, d, convert) for s, d in items]
        return list(await asyncio.gather(*(self._step_or_error(s, d, convert) for s, d in items)))

    async def _step_or_error(self, session: Session, data: Any, convert: Callable[[Observation], Any] | None) -> Any:
        try:
            obs = await self.step(session, data)
            return obs if convert is None else convert(obs)
        except Exception as exc:
            return exc

    def _step_inline(self, session: Session, action: Action, kwargs: dict[str, Any] | None) -> Any:
        """One step of an inline env, on the loop, without the lock or the generic runner.

        Inline env code runs to completion without yielding to the event loop, so nothing can
        interleave with it on this session: the lock could never be contended. Returns what the
        env returned (the caller settles a non-observation and counts the step).
        """
        if session._closed or session.env is None:
            raise SessionError("Session environment not initialized for websocket")
        session.last_activity = time.monotonic()
        try:
            return session.env.step(action, **kwargs) if kwargs else session.env.step(action)
        except (ValidationError, SessionError):
            raise
        except Exception as exc:
            raise _env_error(exc) from exc

    async def _settle_inline(self, session: Session, result: Any) -> Observation:
        """An inline env's step returned something other than an observation: an awaitable is
        awaited under the session's lock; anything else is an ``ExecutionError``."""
        if not inspect.isawaitable(result):
            _expect_observation("step", result)
        async with session._lock:
            obs: Observation = await self._run(session, _awaited, "step", result)
        return obs

    async def _step_locked(self, session: Session, action: Action, kwargs: dict[str, Any] | None) -> Observation:
        async with session._lock:
            self._check_usable(session)
            session.last_activity = time.monotonic()
            env = session.env
            fn = env.step_async if session.runner.kind == "async" else env.step  # type: ignore[union-attr]
            obs = await self._run(session, fn, "step", action, **(kwargs or {}))
            session.step_count += 1
            return obs

    async def state(self, session: Session) -> dict[str, Any]:
        async with session._lock:
            self._check_usable(session)
            session.last_activity = time.monotonic()
            state = await self._run(session, _read_state, "state", session.env)
        if isinstance(state, BaseModel):
            return state.model_dump()
        if isinstance(state, dict):
            return state
        raise ExecutionError(f"state returned {type(state).__name__}, expected a State model")

    def _check_usable(self, session: Session) -> None:
        if session._closed or session.env is None:
            raise SessionError("Session environment not initialized for websocket")

    async def _run(self, session: Session, fn: Callable[..., Any], what: str, *args: Any, **kw: Any) -> Any:
        runner = session.runner
        assert runner is not None
        try:
            result = await runner.call(fn, *args, timeout=self.step_timeout_s, **kw)
        except TimeoutError:
            raise ExecutionError(
                f"{what} timed out after {self.step_timeout_s} seconds",
                data={"timeout_s": self.step_timeout_s},
            ) from None
        except (ValidationError, SessionError):
            raise
        except Exception as exc:
            raise _env_error(exc) from exc
        if what != "state":
            _expect_observation(what, result)
        return result

    # -- idle reaping -----------------------------------------------------------------------------

    def start_reaper(self) -> None:
        if self.idle_timeout_s is None or self._reaper is not None:
            return
        interval = max(min(self.idle_timeout_s / 4, 30.0), 0.05)
        self._reaper = asyncio.get_running_loop().create_task(self._reap_loop(interval))

    async def _reap_loop(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            await self.reap_idle()

    async def reap_idle(self) -> list[str]:
        """Close sessions with no connection that have been idle past the timeout."""
        if self.idle_timeout_s is None:
            return []
        now = time.monotonic()
        victims = [
            s for s in list(self._sessions.values())
            if s.ready and not s.connections and not s._closed
            and now - s.last_activity > self.idle_timeout_s and not s._lock.locked()
        ]
        for s in victims:
            await self.close(s, "idle timeout")
        return [s.id for s in victims]

    async def shutdown(self) -> None:
        """Stop the reaper and close every session."""
        if self._reaper is not None:
            self._reaper.cancel()
            self._reaper = None
        await asyncio.gather(*(self.close(s, "server shutdown") for s in list(self._sessions.values())),
                             return_exceptions=True)
        if self._closing_tasks:
            await asyncio.gather(*self._closing_tasks, return_exceptions=True)
        for ex in (self._pool, self._single):
            if ex is not None:
                ex.shutdown(wait=False, cancel_futures=True)
        self._pool = self._single = None

    def _emit(self, hook: str, session: Session, **extra: Any) -> None:
        if self._notify is None:
            return
        info = event_for(hook, dict(session_id=session.id, env=self.env_name, transport=session.transport, **extra))
        self._notify(hook, info)


def _invalid_action(exc: PydanticValidationError) -> ValidationError:
    return ValidationError("Invalid message", data={"errors": validation_errors(exc)})


def _env_error(exc: Exception) -> ExecutionError:
    """An exception raised by env code, as the wire's EXECUTION_ERROR (message = ``str(exc)``)."""
    return ExecutionError(str(exc), data={"exception": type(exc).__name__})


def _expect_observation(what: str, result: Any) -> None:
    if not isinstance(result, Observation):
        raise ExecutionError(f"{what} returned {type(result).__name__}, expected an Observation instance")


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _read_state(env: Any) -> Any:
    return env.state


def _signature_params(cls: type | None, method: str) -> tuple[set[str], bool]:
    fn = getattr(cls, method, None) if cls is not None else None
    if fn is None:
        return set(), True
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return set(), True
    names = {p.name for p in sig.parameters.values() if p.kind in
             (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)} - {"self"}
    var_kw = any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values())
    return names, var_kw
