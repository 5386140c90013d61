"""One session's state, where its env code runs, and the errors env code turns into.

``Session`` is bookkeeping only: the ``SessionManager`` changes it (transports read it). ``Runner``
(``openenv.sessions.runner``, re-exported here) executes one session's env calls.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from typing import Any

from pydantic import ValidationError as PydanticValidationError

from openenv.env import env_traits
from openenv.errors import ExecutionError, ResetRequiredError, ValidationError
from openenv.sessions.runner import Runner
from openenv.types import Observation
from openenv.wire import validation_errors

__all__ = ["DEFAULT_CONCURRENT_SESSIONS", "DEFAULT_FACTORY_TIMEOUT_S", "DEFAULT_STEP_TIMEOUT_S",
           "ResetRequiredError", "Runner", "Session", "default_max_sessions"]

#: Sessions a server holds for a concurrency-safe env when no ``max_sessions`` is given (a trainer
#: opens one session per generation; 64 covers a typical batch without unbounded memory).
DEFAULT_CONCURRENT_SESSIONS = 64

#: Deadline of each reset/step/state that runs off the event loop or is async, when none is given
#: (``--step-timeout``). A call that overruns it on a thread fails its session and frees the slot.
DEFAULT_STEP_TIMEOUT_S = 300.0

#: Deadline of the env factory (building one session's env) when none is given.
DEFAULT_FACTORY_TIMEOUT_S = 300.0


def default_max_sessions(factory: Any) -> int:
    """The capacity for ``factory`` when the user gives none: ``DEFAULT_CONCURRENT_SESSIONS`` for an
    env declaring ``SUPPORTS_CONCURRENT_SESSIONS = True``, else 1 (sessions would share state)."""
    return DEFAULT_CONCURRENT_SESSIONS if env_traits(factory)["SUPPORTS_CONCURRENT_SESSIONS"] else 1


class Session:
    """One live env instance and its bookkeeping.

    ``connections`` counts live connections driving the session (``SessionManager.attach`` /
    ``detach``); a session with one is never reaped. ``refused`` is the set of operations the
    server's mode refuses on this session (``openenv.modes.ModePolicy``), empty in simulation.
    ``failed`` says why the session was failed (then closed, its slot freed, its env abandoned).
    """

    __slots__ = (
        "_close_requested", "_closed", "_lock", "connections", "created_at", "env", "failed", "id",
        "last_activity", "one_shot", "owner", "ready", "refused", "reset_done", "rubric", "rubric_steps",
        "runner", "step_count", "transport",
    )

    def __init__(self, session_id: str, owner: str | None, transport: str, *, one_shot: bool = False,
                 refused: frozenset[str] = frozenset()) -> None:
        self.id = session_id
        self.owner = owner
        self.transport = transport
        self.one_shot = one_shot
        self.refused = refused
        self.env: Any = None
        self.runner: Runner | None = None
        self.created_at = time.time()
        self.last_activity = time.monotonic()
        self.connections = 0
        self.step_count = 0
        self.reset_done = False
        #: The rubric this session scores with (``Scorer.for_session``; None: the server has none).
        self.rubric: Any = None
        #: The episode so far, for a server rubric that scores whole episodes (else None).
        self.rubric_steps: list[Any] | None = None
        self.ready = False
        self._lock = asyncio.Lock()
        self._close_requested = False
        self._closed = False
        #: Why the session was failed (a call overran its deadline and its env was abandoned).
        self.failed: str | None = None

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


def invalid_action(exc: PydanticValidationError) -> ValidationError:
    return ValidationError("Invalid message", data={"errors": validation_errors(exc)})


def env_error(session: Session, exc: Exception, what: str) -> ExecutionError:
    """An exception raised by env code, as the wire's ``EXECUTION_ERROR`` (message = ``str(exc)``).

    A ``step`` that fails before the session's first ``reset`` with the signature of state that
    only ``reset`` creates (an ``AttributeError``, or a ``TypeError`` about ``None``) tells the
    caller to reset first (``RESET_REQUIRED``); any other failure is reported as it is.
    """
    if what == "step" and not session.reset_done and _missing_state(exc):
        detail = f"{type(exc).__name__}: {exc}"
        hint = (" A request without a session gets a fresh env every time: open a session (WebSocket "
                "/ws, or POST /sessions), reset it, then step it." if session.one_shot else "")
        return ResetRequiredError(
            f"step was called before reset and the env failed ({detail}). Call reset first to start "
            f"an episode, then step.{hint}",
            data={"exception": type(exc).__name__, "detail": detail})
    return ExecutionError(str(exc), data={"exception": type(exc).__name__})


def _missing_state(exc: Exception) -> bool:
    return isinstance(exc, AttributeError) or (isinstance(exc, TypeError) and "NoneType" in str(exc))


def expect_observation(what: str, result: Any) -> None:
    if not isinstance(result, Observation):
        raise ExecutionError(f"{what} returned {type(result).__name__}, expected an Observation instance")


async def awaited(awaitable: Any) -> Any:
    return await awaitable


def read_state(env: Any) -> Any:
    return env.state


def signature_params(cls: type | None, method: str) -> tuple[set[str], bool]:
    """Named parameters of ``cls.method`` and whether it takes ``**kwargs`` (True if unknown)."""
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
