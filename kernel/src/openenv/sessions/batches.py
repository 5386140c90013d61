"""Batched and multiplexed steps (``SessionManager``'s base class ``Batches``).

Both run through the manager's one step path (``_step``/``step_outcome``): a batch is that many
steps of one session in order, stopping at the first ``done`` or error; ``step_many`` is one step
in each of several sessions, each result independent of the others.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from openenv.sessions.session import Session
from openenv.types import Action, Observation, StepOutcome

__all__ = ["Batches"]


class Batches:
    """``step_batch`` and ``step_many`` for ``SessionManager`` (which defines the methods below)."""

    if TYPE_CHECKING:  # defined by SessionManager
        def check_mode(self, session: Session | None, operation: str) -> None: ...
        def validate_action(self, data: Any) -> Action: ...
        async def _step(self, session: Session, action: Action, kwargs: dict[str, Any] | None) -> StepOutcome: ...
        async def step_outcome(self, session: Session, data: Any, kwargs: dict[str, Any] | None = None,
                               kwargs_loc: Any = ..., *, tool: bool = False) -> StepOutcome: ...

    async def step_batch(self, session: Session, actions: list[Any],
                         convert: Callable[[Observation], Any] | None = None, *,
                         render: Callable[[StepOutcome], Any] | None = None) -> tuple[list[Any], Exception | None]:
        """Run ``actions`` in order, as that many ``step`` calls; stop after the first ``done`` or error.

        Returns the observations (each passed through ``convert``, or its outcome through
        ``render`` — e.g. to its wire payload; an exception there stops the batch like a failed
        step) and the error that stopped the batch (``None`` if none did), leaving the session as
        a failed ``step`` does. A mode refusal raises before any action runs. An inline env's batch
        never yields to the loop.
        """
        if session.refused:
            self.check_mode(session, "step")
        out: list[Any] = []
        for data in actions:
            try:
                outcome = await self._step(session, self.validate_action(data), None)
                out.append(render(outcome) if render is not None else
                           outcome.applied() if convert is None else convert(outcome.applied()))
            except Exception as exc:
                return out, exc
            if outcome.observation.done:
                break
        return out, None

    async def step_many(self, items: list[tuple[Session, Any]],
                        convert: Callable[[Observation], Any] | None = None, *,
                        render: Callable[[StepOutcome], Any] | None = None) -> list[Any]:
        """One ``step`` in each of several sessions (``(session, action data)`` pairs), independently:
        one element per item, in order, the observation (through ``convert``, or its outcome through
        ``render``) or the exception it raised. Inline envs step back to back on the loop; others
        concurrently, each session in order."""
        if all(s.runner is not None and s.runner.kind == "inline" for s, _ in items):
            # Nothing to overlap: each step runs to completion on the loop, so no tasks either.
            return [await self._step_or_error(s, d, convert, render) for s, d in items]
        return list(await asyncio.gather(*(self._step_or_error(s, d, convert, render) for s, d in items)))

    async def _step_or_error(self, session: Session, data: Any, convert: Callable[[Observation], Any] | None,
                             render: Callable[[StepOutcome], Any] | None) -> Any:
        try:
            outcome = await self.step_outcome(session, data)
            if render is not None:
                return render(outcome)
            return outcome.applied() if convert is None else convert(outcome.applied())
        except Exception as exc:
            return exc
