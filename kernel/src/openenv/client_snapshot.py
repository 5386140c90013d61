"""The client side of snapshots (``openenv.snapshots``): ``await env.snapshot()``,
``await env.restore(snapshot)`` and ``await env.fork()`` on ``EnvClient`` (sync twins on
``SyncEnvClient``), over the ``/ws`` ``snapshot`` and ``restore`` frames that the ``snapshot`` hello
extension grants.

A snapshot is plain JSON data: keep it in memory, write it to a file, send it to another machine;
give it back to any server of the same env (and version, and snapshot key) to continue the episode
there. ``fork()`` does both at once: a new session continuing from this one's current point, on
the same server or on the one a given client is connected to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from openenv.protocol import EXT_SNAPSHOT, T_OBSERVATION, T_RESTORE, T_SNAPSHOT, expect, frame

if TYPE_CHECKING:
    from openenv.client import EnvClient
    from openenv.types import StepResult

__all__ = ["SnapshotCalls"]

_HINT = ("Upstream servers have no snapshots; on this project's servers the env must declare "
         "SUPPORTS_SNAPSHOT. Replay the episode's actions on a new session instead.")


class SnapshotCalls:
    """Mixed into ``EnvClient``: needs its ``_request``, ``_require_extension``, ``_result`` and
    ``new_session``."""

    async def snapshot(self) -> dict[str, Any]:
        """The sealed snapshot of this session's live episode (call ``reset`` first).
        ``SnapshotError`` when the env cannot snapshot; ``ConfigError`` for a server without the
        ``snapshot`` extension."""
        await self._require_extension(EXT_SNAPSHOT, "snapshots", hint=_HINT)  # type: ignore[attr-defined]
        reply = await self._request(frame(T_SNAPSHOT))  # type: ignore[attr-defined]
        data: dict[str, Any] = expect(reply, T_SNAPSHOT)
        return data

    async def restore(self, snapshot: dict[str, Any]) -> StepResult[Any]:
        """Continue the episode of ``snapshot`` in this session (its current episode, if any, is
        replaced); the observation at the snapshot's point. ``SnapshotError`` names why a server
        refuses one (another env or version, a broken seal, a malformed object)."""
        await self._require_extension(EXT_SNAPSHOT, "snapshots", hint=_HINT)  # type: ignore[attr-defined]
        reply = await self._request(frame(T_RESTORE, snapshot))  # type: ignore[attr-defined]
        result: StepResult[Any] = self._result(expect(reply, T_OBSERVATION))  # type: ignore[attr-defined]
        return result

    async def fork(self, into: EnvClient[Any, Any] | None = None) -> tuple[EnvClient[Any, Any], StepResult[Any]]:
        """A new session continuing this one's episode from its current point: on the same server
        (a ``new_session()``, closed with this client) or in ``into``, a client of another server
        of the same env. Returns that client and the observation it continues from; the two
        sessions go on independently."""
        snap = await self.snapshot()
        target: EnvClient[Any, Any] = into if into is not None else await self.new_session()  # type: ignore[attr-defined]
        return target, await target.restore(snap)
