"""``SessionManager``: the owner of every session rule (see the package docstring)."""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
import uuid
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

from openenv.env import declared_action_type, env_class_of, env_traits
from openenv.errors import (
    CapacityError,
    ConfigError,
    ExecutionError,
    FactoryError,
    OpenEnvError,
    SessionError,
)
from openenv.events import LifecycleEvent, SessionRefused, event_for
from openenv.modes import Mode, ModePolicy
from openenv.rubric import Rubric
from openenv.sessions.arguments import ResetArgsPolicy, StepKwargsPolicy
from openenv.sessions.batches import Batches
from openenv.sessions.observed import ObservedSteps
from openenv.sessions.reaping import IdleReaping
from openenv.sessions.runner import EnvThread, abandon_env, close_env, culprit_name, make_runner
from openenv.sessions.scoring import Scorer, refuse_client_reward
from openenv.sessions.session import (
    DEFAULT_FACTORY_TIMEOUT_S,
    DEFAULT_STEP_TIMEOUT_S,
    Session,
    awaited,
    env_error,
    expect_observation,
    invalid_action,
    read_state,
)
from openenv.sessions.snapshotting import Snapshots
from openenv.sessions.tasking import TaskRule
from openenv.tasks import TaskSource, tasks_of
from openenv.types import Action, Observation, StepOutcome

__all__ = ["DECLARED", "SessionManager"]

#: ``SessionManager(tasks=DECLARED)``: serve the tasks the env class declares (``tasks_of``).
DECLARED: object = object()

log = logging.getLogger("openenv.sessions")

_KWARGS_LOC = ("kwargs",)

def _action_rule(action_type: type[Action], env_class: type | None) -> Callable[[Any], Action]:
    """How actions of ``action_type`` are validated: the MCP dispatch of docs/protocol.md §2.5 for
    the base ``Action`` and MCP action types (not for tool envs: their action type dispatches
    itself), else the model's validator (minus its Python wrapper, unless the class customises it)."""
    from openenv.tools.environment import ToolEnvironment
    from openenv.tools.wire import MCP_ACTION_TYPES, CallToolAction, dispatch_action

    is_tool_env = isinstance(env_class, type) and issubclass(env_class, ToolEnvironment)
    if action_type in MCP_ACTION_TYPES and not is_tool_env:
        return partial(dispatch_action, other=None if action_type is CallToolAction else action_type)
    base_validate = getattr(BaseModel.model_validate, "__func__", None)
    if getattr(action_type.model_validate, "__func__", None) is not base_validate:
        return action_type.model_validate
    validate: Callable[[Any], Action] = action_type.__pydantic_validator__.validate_python
    return validate


class SessionManager(ObservedSteps, Snapshots, IdleReaping, Batches):
    """Creates, runs and destroys sessions for one env factory; every transport calls it."""

    def __init__(
        self,
        factory: Callable[[], Any],
        *,
        env_name: str | None = None,
        max_sessions: int = 1,
        step_timeout_s: float | None = DEFAULT_STEP_TIMEOUT_S,
        factory_timeout_s: float | None = DEFAULT_FACTORY_TIMEOUT_S,
        close_grace_s: float = 5.0,
        isolation: str = "thread",
        idle_timeout_s: float | None = 300.0,
        mode: Mode | str = Mode.SIMULATION,
        strict_production: bool = False,
        action_type: type[Action] | None = None,
        notify: Callable[[str, LifecycleEvent], None] | None = None,
        rubric: Rubric | None = None,
        tasks: TaskSource | object | None = DECLARED,
    ) -> None:
        self.factory = factory
        self.env_name = env_name or getattr(factory, "__name__", type(factory).__name__)
        self.max_sessions = max_sessions
        self.step_timeout_s = step_timeout_s
        #: Deadline of the env factory (building one session's env).
        self.factory_timeout_s = factory_timeout_s
        #: How long ``close`` waits for a call still running in the env before abandoning it.
        self.close_grace_s = close_grace_s
        if isolation not in ("thread", "process"):
            raise ConfigError(f"isolation must be 'thread' or 'process', got {isolation!r}.")
        #: ``"process"``: each session's env in its own worker process (``isolation``).
        self.isolation = isolation
        self.idle_timeout_s = idle_timeout_s
        #: The mode rule every transport obeys (``openenv.modes``).
        self.policy = ModePolicy(mode, strict=strict_production)
        self.mode: Mode = self.policy.mode
        cls = env_class_of(factory)
        self.env_class = cls
        self.traits = env_traits(factory)
        self.action_type: type[Action] = declared_action_type(factory, action_type)
        self.is_async = bool(cls is not None and hasattr(cls, "is_async") and cls.is_async())
        #: The step-keyword-argument rule every transport obeys (``arguments``).
        self.step_kwargs = StepKwargsPolicy(cls, is_async=self.is_async)
        self._kwargs_from_instance = False
        self._notify = notify
        self._observers: list[Callable[[LifecycleEvent], None]] = []
        self._rubric_s: dict[str, float] = {}
        #: The server's rubric (``scoring``); None: the env's own reward goes out untouched.
        self.scorer: Scorer | None = None if rubric is None else Scorer(rubric, timeout_s=step_timeout_s)
        self._sessions: dict[str, Session] = {}
        self._single: EnvThread | None = None
        self._reaper: asyncio.Task[None] | None = None
        self._closing_tasks: set[asyncio.Task[Any]] = set()
        self._reset_args = ResetArgsPolicy(cls, is_async=self.is_async, env_name=str(self.env_name))
        #: The env's tasks (DECLARED: what its class declares), checked now so a bad task file
        #: stops the server at start-up naming the file, row and id.
        self.tasks: TaskSource | None = tasks_of(cls, factory=factory) if tasks is DECLARED else tasks  # type: ignore[assignment]
        if self.tasks is not None:
            self.tasks.validate()
        self._task_rule = TaskRule(self.tasks, cls, is_async=self.is_async, env_name=str(self.env_name))
        #: The one action-validation rule (``validate_action``), chosen here from the action type.
        self._validate: Callable[[Any], Action] = _action_rule(self.action_type, cls)
        if isolation == "process":
            from openenv.sessions.isolation import check_picklable

            check_picklable(factory, str(self.env_name))

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

    def visible_to(self, session_id: str, principal: str | None) -> bool:
        """Whether ``principal`` may learn that ``session_id`` exists (ready or still initializing):
        a session with an owner is visible to that owner only."""
        session = self._sessions.get(session_id)
        return session is not None and (session.owner is None or session.owner == principal)

    # -- lifecycle --------------------------------------------------------------------------------

    async def open(self, *, owner: str | None = None, transport: str = "ws", attach: bool = False,
                   one_shot: bool = False) -> Session:
        """Reserve a slot, build the env, return the ready session.

        ``attach=True`` counts the caller's connection on the session at once (as ``attach``).
        ``one_shot=True`` marks a transient session serving one session-less request (the mode
        policy treats those differently). Raises ``CapacityError`` when full and ``FactoryError``
        when the factory raises; in both cases nothing is left behind.
        """
        if len(self._sessions) >= self.max_sessions:
            active = len(self._sessions)
            self._tell(SessionRefused(str(self.env_name), transport, active))
            raise CapacityError(
                f"Server at capacity: {active}/{self.max_sessions} sessions active. "
                "Cannot accept new connections.",
                data={"active_sessions": active, "max_sessions": self.max_sessions},
            )
        session = Session(str(uuid.uuid4()), owner, transport, one_shot=one_shot,
                          refused=self.policy.refused(one_shot=one_shot))
        self._sessions[session.id] = session  # the reservation
        try:
            session.runner = make_runner(session.id, env_name=str(self.env_name), traits=self.traits,
                                         isolation=self.isolation, is_async=self.is_async,
                                         shared_thread=self._shared_thread)
            try:
                session.env = await session.runner.create(self.factory, self.factory_timeout_s)
            except TimeoutError:
                timeout = self.factory_timeout_s
                abandon_env(session, str(self.env_name), f"the env factory did not return within {timeout} seconds")
                raise FactoryError(f"Environment factory '{self.env_name}' timed out after {timeout} seconds.",
                                   data={"factory_name": self.env_name, "timeout_s": timeout}) from None
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
            if isinstance(exc, FactoryError):
                raise
            if isinstance(exc, Exception):
                log.warning("env factory %s failed: %r", self.env_name, exc)
                raise FactoryError(
                    f"Environment factory '{self.env_name}' failed to create instance.",
                    data={"factory_name": self.env_name, "detail": f"{type(exc).__name__}: {exc}"},
                ) from exc
            raise
        if self.scorer is not None:
            session.rubric = self.scorer.for_session()
            if not self.scorer.rubric.per_step:
                session.rubric_steps = []
        session.ready = True
        if self.env_class is None and not self._kwargs_from_instance:
            # A factory without a declared class: the first env tells what step takes.
            self._kwargs_from_instance = True
            self.step_kwargs = StepKwargsPolicy(type(session.env), is_async=self.is_async)
        if attach:
            session.connections += 1
        self._emit("openenv_session_opened", session, active_sessions=len(self._sessions))
        return session

    async def close(self, session: Session, reason: str = "closed") -> None:
        """Close the env (on its own thread) and free the slot. Idempotent.

        A call still running in the env gets ``close_grace_s`` to finish; after that (or when
        ``env.close()`` itself overruns the grace) the env is abandoned, not waited for.
        """
        if session._closed:
            return
        session._closed = True
        try:
            await close_env(session, str(self.env_name), self.close_grace_s, reason)
        finally:
            if session.runner is not None:
                session.runner.shutdown()
            session.env = None
            self._sessions.pop(session.id, None)
            self._emit("openenv_session_closed", session, reason=reason, steps=session.step_count,
                       active_sessions=len(self._sessions))

    def _fail(self, session: Session, why: str) -> None:
        """A call of ``session`` overran its deadline and still runs in the env: fail the session, free
        its slot now, and never enter that env again (``close()`` is skipped: it would wait too)."""
        session.failed = f"Session {session.id} failed: {why}; its env was abandoned. Open a new session."
        already = session._closed
        session._closed = True
        abandon_env(session, str(self.env_name), why)
        if not already and self._sessions.pop(session.id, None) is not None:
            session.env = None
            self._emit("openenv_session_closed", session, reason=why, steps=session.step_count,
                       active_sessions=len(self._sessions))

    def _shared_thread(self) -> EnvThread:
        """The one thread ``REQUIRES_SINGLE_THREAD_EXECUTOR`` envs share (a new one once abandoned)."""
        shared = self._single
        if shared is None or shared._abandoned is not None:
            shared = self._single = EnvThread(
                "openenv-env", culprit_name("shared_single_thread", str(self.env_name)))
        return shared

    def close_soon(self, session: Session, reason: str) -> None:
        """Schedule ``close`` without waiting (used when a connection drops mid-operation)."""
        task = asyncio.get_running_loop().create_task(self.close(session, reason))
        self._closing_tasks.add(task)
        task.add_done_callback(self._closing_tasks.discard)

    # -- connections and activity -----------------------------------------------------------------

    def attach(self, session: Session) -> Session:
        """Count a live connection on ``session``: a session with a connection is never reaped
        (dead connections are found by the transport's pings). Pair with ``detach``."""
        session.connections += 1
        session.last_activity = time.monotonic()
        return session

    def join(self, session_id: str, *, principal: str | None = None, exclusive: bool = True) -> Session:
        """Look up an existing session for a new connection and ``attach`` it (``/ws?session_id=``).

        A session that has an owner can only be joined by that principal; anyone else is told
        the id is unknown, which reveals nothing about other callers' sessions (docs/protocol.md §11 B16).
        ``exclusive`` refuses a session that already has a connection.
        """
        if not self.visible_to(session_id, principal):  # checked first: even "initializing" is news
            raise SessionError(f"Unknown session_id: {session_id}")
        session = self.get(session_id)
        if exclusive and session.connections:
            raise SessionError(f"Session {session_id} already has an attached WebSocket")
        return self.attach(session)

    async def detach(self, session: Session, *, close: bool = False, reason: str = "closed") -> None:
        """A connection on ``session`` ended. ``close=True`` (the connection owned the session)
        closes it; otherwise it closes only if a close was requested while it was attached."""
        session.connections = max(0, session.connections - 1)
        session.last_activity = time.monotonic()
        if close:
            await self.close(session, reason)
        elif session._close_requested and not session.connections:
            await self.close(session, "closed at detach")

    @staticmethod
    def touch(session: Session) -> None:
        """Record activity on ``session`` (any request or frame for it), postponing idle reaping."""
        session.last_activity = time.monotonic()

    async def request_close(self, session: Session, reason: str = "closed") -> bool:
        """Close now if no connection is attached, else at detach. Returns True if closed now."""
        if session.connections:
            session._close_requested = True
            return False
        await self.close(session, reason)
        return True

    # -- the protocol -----------------------------------------------------------------------------

    def validate_action(self, data: Any) -> Action:
        """Validate an action object; ``ValidationError`` with ``errors`` relative to the action.

        An env whose action type is the base ``Action`` or an MCP action (and that is not a tool
        env, which dispatches on its own) also takes ``{"type":"list_tools"|"call_tool", ...}``
        objects as MCP actions (docs/protocol.md §2.5), on every transport."""
        try:
            return self._validate(data)
        except PydanticValidationError as exc:
            raise invalid_action(exc) from None

    def check_mode(self, session: Session | None, operation: str) -> None:
        """``ModeError`` if the server's mode refuses ``operation`` (``reset``/``step``/``state``) on
        ``session`` (``None``: a session-less request, checked before any env is built)."""
        if session is None:
            self.policy.check(operation, one_shot=True)
        elif operation in session.refused:
            raise self.policy.error(operation, one_shot=session.one_shot)

    def reset_kwargs(self, data: dict[str, Any]) -> dict[str, Any]:
        """Validate ``seed``/``episode_id`` and drop keys ``reset`` does not take (docs/protocol.md §3.3, B21)."""
        return self._reset_args(data)

    async def reset(self, session: Session, data: dict[str, Any] | None = None) -> Observation:
        """Start a new episode of ``session``; the env's observation (see ``reset_outcome``)."""
        return (await self.reset_outcome(session, data)).observation

    async def reset_outcome(self, session: Session, data: dict[str, Any] | None = None) -> StepOutcome:
        """Start a new episode: the reset rules (mode, ``seed``/``episode_id``), then the env.
        With a server rubric the outcome carries empty components (its episode starts over)."""
        if session.refused:
            self.check_mode(session, "reset")
        data, task_meta = self._task_rule(data or {})
        kwargs = self.reset_kwargs(data)
        async with session._lock:
            self._check_usable(session)
            session.last_activity = time.monotonic()
            env = session.env
            fn = env.reset_async if session.runner.kind == "async" else env.reset  # type: ignore[union-attr]
            obs: Observation = await self._run(session, fn, "reset", **kwargs)
            if task_meta:
                obs.metadata.update(task_meta)  # records store which task/group an episode played
            session.step_count = 0
            session.reset_done = True
            if self.scorer is not None:
                return self.scorer.on_reset(session, obs)
            return StepOutcome(obs, obs.reward)

    async def step(self, session: Session, data: Any, kwargs: dict[str, Any] | None = None,
                   kwargs_loc: Sequence[Any] = _KWARGS_LOC) -> Observation:
        """One step (see ``step_outcome``); the observation, its ``reward`` the reply's reward."""
        return (await self.step_outcome(session, data, kwargs, kwargs_loc)).applied()

    async def call_tool(self, session: Session, data: Any) -> Observation:
        """A tool call (``{"type":"call_tool"|"list_tools", ...}``) run as a step of ``session``
        (see ``step_outcome(tool=True)``); the observation, as ``step`` returns it."""
        return (await self.step_outcome(session, data, tool=True)).applied()

    async def step_outcome(self, session: Session, data: Any, kwargs: dict[str, Any] | None = None,
                           kwargs_loc: Sequence[Any] = _KWARGS_LOC, *, tool: bool = False) -> StepOutcome:
        """One step: the mode rule, the step-kwargs rule, action validation, then ``_step``.

        ``kwargs`` are the caller's raw step keyword arguments (checked by ``step_kwargs``; errors
        located under ``kwargs_loc``). ``tool=True``: a tool call, to which no mode rule applies
        (tools are what production mode serves; tools filter themselves by mode).
        """
        if session.refused and not tool:
            self.check_mode(session, "step")
        if kwargs:
            if self.scorer is not None:
                refuse_client_reward(kwargs, kwargs_loc)
            kwargs = self.step_kwargs(kwargs, kwargs_loc)
        return await self._step(session, self.validate_action(data), kwargs)

    async def _step(self, session: Session, action: Action, kwargs: dict[str, Any] | None) -> StepOutcome:
        """The one step path (single, tool, batched and multiplexed steps): run the env where the
        session's runner says, count the step, score it.

        An inline env (on the loop, never yielding) needs no lock: nothing can interleave with it.
        Its step may still return an awaitable, which is awaited under the lock. Every other env is
        stepped under the session's lock (a reset or close waits for it), and scored there."""
        runner = session.runner
        if runner is not None and runner.kind == "inline" and not session._lock.locked():
            if session._closed or session.env is None:
                raise SessionError("Session environment not initialized for websocket")
            session.last_activity = time.monotonic()
            try:
                obs = session.env.step(action, **kwargs) if kwargs else session.env.step(action)
            except OpenEnvError:  # already structured (the env's own ValidationError/ExecutionError…): keep it
                raise
            except Exception as exc:
                raise env_error(session, exc, "step") from exc
            if not isinstance(obs, Observation):
                if not inspect.isawaitable(obs):
                    expect_observation("step", obs)
                async with session._lock:
                    obs = await self._run(session, awaited, "step", obs)
            session.step_count += 1
            scorer = self.scorer
            if scorer is None:  # the hot path: no further call
                return StepOutcome(obs, obs.reward)
            if scorer.inline:
                return scorer.score_inline(session, action, obs)
            return await scorer.score(session, action, obs)
        async with session._lock:
            self._check_usable(session)
            session.last_activity = time.monotonic()
            env = session.env
            fn = env.step_async if runner.kind == "async" else env.step  # type: ignore[union-attr]
            obs = await self._run(session, fn, "step", action, **(kwargs or {}))
            session.step_count += 1
            if self.scorer is None:
                return StepOutcome(obs, obs.reward)
            return await self.scorer.score(session, action, obs)

    async def state(self, session: Session) -> dict[str, Any]:
        if session.refused:
            self.check_mode(session, "state")
        async with session._lock:
            self._check_usable(session)
            session.last_activity = time.monotonic()
            state = await self._run(session, read_state, "state", session.env)
        if isinstance(state, BaseModel):
            return state.model_dump()
        if isinstance(state, dict):
            return state
        raise ExecutionError(f"state returned {type(state).__name__}, expected a State model")

    def _check_usable(self, session: Session) -> None:
        if session.failed is not None:
            raise SessionError(session.failed)
        if session._closed or session.env is None:
            raise SessionError("Session environment not initialized for websocket")

    async def _run(self, session: Session, fn: Callable[..., Any], what: str, *args: Any, **kw: Any) -> Any:
        runner = session.runner
        assert runner is not None
        try:
            result = await runner.call(fn, *args, timeout=self.step_timeout_s, **kw)
        except TimeoutError:
            why = f"{what} timed out after {self.step_timeout_s} seconds"
            if runner.off_loop:  # the call still runs in the env: the session cannot go on
                self._fail(session, why)
                why += ("; the call could not be stopped, so the session was closed and its env "
                        "abandoned: open a new session")
            raise ExecutionError(why, data={"timeout_s": self.step_timeout_s,
                                            "session_closed": runner.off_loop}) from None
        except OpenEnvError:  # already structured (the env's own ValidationError/ExecutionError…): keep it
            raise
        except Exception as exc:
            raise env_error(session, exc, what) from exc
        if what not in ("state", "snapshot"):
            expect_observation(what, result)
        return result

    def _emit(self, hook: str, session: Session, **extra: Any) -> None:
        if self._notify is None and not self._observers:
            return
        info = event_for(hook, dict(session_id=session.id, env=self.env_name, transport=session.transport, **extra))
        if self._notify is not None:
            self._notify(hook, info)
        self._tell(info)
