"""Many steps per call: ``step_batch`` (one session) and ``step_many`` (several sessions), the
bodies of ``SessionManager``'s methods of those names (kept apart so each module stays readable;
every rule they apply is the manager's own)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError as PydanticValidationError

from openenv.sessions.session import Session, invalid_action
from openenv.types import Observation

if TYPE_CHECKING:
    from openenv.sessions.manager import SessionManager

__all__ = ["step_batch", "step_many"]


async def step_batch(manager: SessionManager, session: Session, actions: list[Any],
                     convert: Callable[[Observation], Any] | None = None) -> tuple[list[Any], Exception | None]:
    """Run ``actions`` in order, as that many ``step`` calls; stop after the first ``done`` or error.

    Returns the observations (each passed through ``convert`` if given, e.g. to its wire
    payload; an exception there stops the batch like a failed step) and the error that
    stopped the batch (``None`` if none did), leaving the session as a failed ``step`` does. A
    mode refusal raises before any action runs. An inline env's batch never yields to the loop.
    """
    if session.refused:
        manager.check_mode(session, "step")
    out: list[Any] = []
    runner = session.runner
    inline = runner is not None and runner.kind == "inline"
    validate = manager._validate
    for data in actions:
        try:
            try:
                action = validate(data)
            except PydanticValidationError as exc:
                raise invalid_action(exc) from None
            if not inline or session._lock.locked():  # locked: an await below let a reset in
                obs = await manager._step_locked(session, action, None)
            else:
                obs = manager._step_inline(session, action, None)
                if not isinstance(obs, Observation):
                    obs = await manager._settle_inline(session, obs)
                session.step_count += 1
                if manager.scorer is not None:
                    obs = await manager.scorer.score(session, action, obs)
            out.append(obs if convert is None else convert(obs))
        except Exception as exc:
            return out, exc
        if obs.done:
            break
    return out, None

async def step_many(manager: SessionManager, items: list[tuple[Session, Any]],
                    convert: Callable[[Observation], Any] | None = None) -> list[Any]:
    """One ``step`` in each of several sessions (``(session, action data)`` pairs), independently:
    one element per item, in order, the observation (through ``convert``) or the exception it
    raised. Inline envs step back to back on the loop; others concurrently, each session in order.
    """
    if all(s.runner is not None and s.runner.kind == "inline" for s, _ in items):
        # Nothing to overlap: each step runs to completion on the loop, so no tasks either.
        return [await _step_or_error(manager, s, d, convert) for s, d in items]
    return list(await asyncio.gather(*(_step_or_error(manager, s, d, convert) for s, d in items)))

async def _step_or_error(manager: SessionManager, session: Session, data: Any,
                         convert: Callable[[Observation], Any] | None) -> Any:
    try:
        obs = await manager.step(session, data)
        return obs if convert is None else convert(obs)
    except Exception as exc:
        return exc
