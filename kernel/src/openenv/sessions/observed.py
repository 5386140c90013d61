"""The session manager's observed paths: metrics observers and the timed ``reset``/``step``.

``SessionManager.observe(observer)`` tells an observer (the metrics plugin's, for one) of every
session event and every timed operation. Until the first observer is added nothing here runs: the
manager's own ``_step``/``reset_outcome``/``validate_action`` are the fast default; the first
``observe`` shadows them on the instance with the timed versions below, which call the class's
methods and report what each took (and the rubric's share, through ``_TimedScorer``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from openenv.errors import OpenEnvError
from openenv.events import LifecycleEvent, OperationTimed
from openenv.sessions.scoring import Scorer
from openenv.sessions.session import Session
from openenv.types import Action, Observation, StepOutcome

__all__ = ["ObservedSteps"]

log = logging.getLogger("openenv.sessions")


class ObservedSteps:
    """The observer half of ``SessionManager`` (its base class; see the module docstring)."""

    env_name: Any
    scorer: Scorer | None
    _observers: list[Callable[[LifecycleEvent], None]]
    _rubric_s: dict[str, float]

    if TYPE_CHECKING:  # defined by SessionManager
        async def _step(self, session: Session, action: Action, kwargs: dict[str, Any] | None) -> StepOutcome: ...
        async def reset_outcome(self, session: Session, data: dict[str, Any] | None = None) -> StepOutcome: ...
        def validate_action(self, data: Any) -> Action: ...

    def observe(self, observer: Callable[[LifecycleEvent], None]) -> None:
        """Tell ``observer`` of this server's session events (``SessionOpened``, ``SessionClosed``,
        ``SessionRefused``) and of every timed ``reset``/``step`` (``OperationTimed``).

        An observer runs on the event loop inside the request and must return at once; one that
        raises is logged and skipped. Until the first observer is added a step costs nothing extra:
        only then are the step and reset paths replaced by their timed versions."""
        if not self._observers:
            # Instance attributes shadow the methods: the untimed paths stay the fast default.
            self._step = self._timed_step  # type: ignore[method-assign]
            self.reset_outcome = self._timed_reset  # type: ignore[method-assign]
            self.validate_action = self._observed_validate  # type: ignore[method-assign]
            if self.scorer is not None:
                self.scorer = _TimedScorer(self.scorer, self._rubric_s)  # type: ignore[assignment]
        self._observers.append(observer)

    def _tell(self, event: LifecycleEvent) -> None:
        for observer in self._observers:
            try:
                observer(event)
            except Exception:  # an observer must never break the request it watches
                log.exception("session observer %r failed", observer)

    async def _timed(self, session: Session, what: str, call: Awaitable[StepOutcome]) -> StepOutcome:
        """Await ``call`` (the class's own reset or step) and tell the observers what it took and how
        it ended (the error code, or ``None``); a step also reports its rubric's share."""
        started = time.perf_counter()
        code: str | None = None
        try:
            return await call
        except OpenEnvError as exc:
            code = exc.code or type(exc).__name__
            raise
        except Exception as exc:
            code = type(exc).__name__
            raise
        finally:
            rubric_s = self._rubric_s.pop(session.id, None) if what == "step" else None
            self._tell(OperationTimed(str(self.env_name), session.id, what, time.perf_counter() - started,
                                      code, rubric_s))

    async def _timed_step(self, session: Session, action: Action, kwargs: dict[str, Any] | None) -> StepOutcome:
        return await self._timed(session, "step", type(self)._step(self, session, action, kwargs))

    def _observed_validate(self, data: Any) -> Action:
        try:
            return type(self).validate_action(self, data)
        except OpenEnvError as exc:  # an action refused before any step ran: an error, not a step
            self._tell(OperationTimed(str(self.env_name), "", "validate", 0.0, exc.code or type(exc).__name__))
            raise

    async def _timed_reset(self, session: Session, data: dict[str, Any] | None = None) -> StepOutcome:
        return await self._timed(session, "reset", type(self).reset_outcome(self, session, data))


class _TimedScorer:
    """A ``Scorer`` that records how long each step's scoring took, by session id (read back by
    ``ObservedSteps._timed_step``); everything else goes to the scorer it wraps."""

    def __init__(self, scorer: Scorer, spent: dict[str, float]) -> None:
        self._scorer, self._spent = scorer, spent

    def __getattr__(self, name: str) -> Any:
        return getattr(self._scorer, name)

    def score_inline(self, session: Session, action: Any, obs: Observation) -> StepOutcome:
        started = time.perf_counter()
        try:
            return self._scorer.score_inline(session, action, obs)
        finally:
            self._spent[session.id] = time.perf_counter() - started

    async def score(self, session: Session, action: Any, obs: Observation) -> StepOutcome:
        started = time.perf_counter()
        try:
            return await self._scorer.score(session, action, obs)
        finally:
            self._spent[session.id] = time.perf_counter() - started
