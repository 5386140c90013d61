"""Snapshot and restore of a live session (``SessionManager.snapshot`` / ``restore``), a mixin of
the manager. The format and its seal are ``openenv.snapshots``; the env's part is
``Environment.snapshot``/``restore`` (declared with ``SUPPORTS_SNAPSHOT``).

Rules: only an env that declares the trait is asked; a snapshot needs a ``reset`` first; a restore
is refused for another env class or version and for a broken seal; with a server rubric that scores
whole episodes both are refused (a snapshot carries no scored history). A restore leaves the
session as after a ``reset`` at the snapshot's step: ``step_count`` from the snapshot, the env's
observation in the reply.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from openenv.errors import SnapshotError
from openenv.sessions.session import Session
from openenv.snapshots import seal, unseal
from openenv.types import StepOutcome

if TYPE_CHECKING:
    from openenv.modes import ModePolicy
    from openenv.sessions.scoring import Scorer

__all__ = ["Snapshots"]


class Snapshots:
    """Mixed into ``SessionManager`` (uses its ``_run``, ``_check_usable``, ``check_mode``)."""

    #: The key snapshots are sealed with (``openenv.snapshots.snapshot_key``); set by ``create_app``.
    snapshot_key: bytes | None = None

    if TYPE_CHECKING:
        env_class: type | None
        env_name: str
        scorer: Scorer | None
        policy: ModePolicy

        def _check_usable(self, session: Session) -> None: ...
        def check_mode(self, session: Session | None, operation: str) -> None: ...
        async def _run(self, session: Session, fn: Any, what: str, *args: Any, **kw: Any) -> Any: ...

    @property
    def supports_snapshot(self) -> bool:
        return bool(getattr(self.env_class, "SUPPORTS_SNAPSHOT", False))

    def _snapshot_rules(self, session: Session, operation: str) -> type:
        # The mode rule: a snapshot reads the episode like ``state``; a restore starts one like ``reset``.
        if session.refused:
            self.check_mode(session, operation)
        cls = self.env_class
        if cls is None or not self.supports_snapshot:
            raise SnapshotError(
                f"Env '{self.env_name}' does not support snapshots: its class declares no "
                "SUPPORTS_SNAPSHOT = True with snapshot()/restore(). Replay the episode's actions on a "
                "new session instead.", data={"reason": "unsupported"})
        if session.rubric_steps is not None:
            raise SnapshotError(
                "This server's rubric scores whole episodes, and a snapshot carries no scored history: "
                "serve the env without an episode-level rubric (or score episodes client-side) to use "
                "snapshots.", data={"reason": "episode_rubric"})
        return cls

    async def snapshot(self, session: Session) -> dict[str, Any]:
        """The sealed snapshot of ``session``'s live episode (``openenv.snapshots``)."""
        cls = self._snapshot_rules(session, "state")
        async with session._lock:
            self._check_usable(session)
            if not session.reset_done:
                raise SnapshotError("Nothing to snapshot yet: call reset first, then snapshot the episode.",
                                    data={"reason": "not_started"})
            session.last_activity = time.monotonic()
            state = await self._run(session, session.env.snapshot, "snapshot")
            return seal(cls, state, session.step_count, self.snapshot_key)

    async def restore(self, session: Session, blob: Any) -> StepOutcome:
        """Continue the episode of snapshot ``blob`` in ``session``; the env's current observation."""
        cls = self._snapshot_rules(session, "reset")
        checked = unseal(blob, cls, self.snapshot_key)
        async with session._lock:
            self._check_usable(session)
            session.last_activity = time.monotonic()
            obs = await self._run(session, session.env.restore, "restore", checked["state"])
            session.step_count = checked["step_count"]
            session.reset_done = True
            if self.scorer is not None:
                return self.scorer.on_reset(session, obs)
            return StepOutcome(obs, obs.reward)
