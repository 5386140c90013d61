"""Episode checkpoints of a collection: where an unfinished episode goes on from.

With ``checkpoint_every=K`` (``--checkpoint-every K``), every K steps of an episode the env's live
state is snapshotted (``EnvClient.snapshot()``: the env must declare ``SUPPORTS_SNAPSHOT``) and
written, with the steps recorded so far, the episode's random generator and the policy's own state
(a policy with ``checkpoint(ctx) -> JSON`` and ``resume(ctx, data)``, as the built-in ones have;
another policy's ``ctx.state`` starts empty after a restore), to
``<output>.checkpoints/<episode key>.json`` (atomically). When the episode is played again (a retry
after its server died, or ``--resume`` after the whole run was killed), it is restored there
(``EnvClient.restore``) instead of reset: the steps before the checkpoint are not played again, so
their side effects happen once. A finished episode's checkpoint is removed.

The servers a collection starts seal their snapshots with a key kept beside the checkpoints
(``<output>.checkpoints/key``, owner-only, made on first use), passed to them as
``OPENENV_SNAPSHOT_KEY``: a later ``--resume``, with servers started anew, can restore them. (A
server given with ``--base-url`` must keep its own key for that: its ``OPENENV_SNAPSHOT_KEY`` or token.)

A checkpoint that cannot be used (another env, a broken seal, a file that does not parse) is
dropped and the episode starts over, with one warning.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import secrets
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openenv.errors import ConfigError, SnapshotError
from openenv.snapshots import rng_state, set_rng_state
from openenv_rollouts.records import StepRecord

if TYPE_CHECKING:
    from openenv_rollouts.policies import EpisodeContext, Policy
    from openenv_rollouts.records import EpisodeRecord

__all__ = ["Checkpoints"]

log = logging.getLogger("openenv_rollouts.checkpoints")

_FORMAT = "openenv.checkpoint/1"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


class Checkpoints:
    """The checkpoint files of one output (``<output>.checkpoints/``)."""

    def __init__(self, output: Path, every: int) -> None:
        self.dir = Path(str(output) + ".checkpoints")
        self.every = every

    def snapshot_key(self) -> str:
        """The key the collection's servers seal snapshots with (made once, kept owner-only)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self.dir / "key"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return path.read_text(encoding="utf-8").strip()
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(secrets.token_urlsafe(32))
        return path.read_text(encoding="utf-8").strip()

    def _path(self, key: str) -> Path:
        return self.dir / (_UNSAFE.sub("_", key) + ".json")

    def save(self, key: str, doc: dict[str, Any]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=".tmp-", suffix=".json")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump({"format": _FORMAT, "key": key, **doc}, f)
            os.replace(tmp, self._path(key))
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise

    def load(self, key: str) -> dict[str, Any] | None:
        path = self._path(key)
        if not path.exists():
            return None
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(doc, dict) or doc.get("format") != _FORMAT or doc.get("key") != key \
                    or not isinstance(doc.get("snapshot"), dict) or not isinstance(doc.get("steps"), list):
                raise ValueError("not a checkpoint of this episode")
        except (OSError, ValueError) as exc:
            log.warning("checkpoint %s is unusable (%s): the episode starts over", path, exc)
            self.drop(key)
            return None
        return doc

    def drop(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)

    async def resume(self, client: Any, key: str, record: EpisodeRecord, ctx: EpisodeContext,
                     rng: random.Random, policy: Policy) -> Any:
        """The episode's last checkpoint restored in ``client``'s session (its step result), with the
        steps recorded before it put back in ``record``/``ctx``, the random generator and the
        policy's own state; ``None`` when there is none (or it cannot be used: then dropped)."""
        doc = self.load(key)
        if doc is None:
            return None
        try:
            result = await client.restore(doc["snapshot"])
            steps = [StepRecord(**s) for s in doc["steps"]]
            set_rng_state(rng, doc["rng"])
            resume = getattr(policy, "resume", None)
            if resume is not None and doc.get("policy") is not None:
                resume(ctx, doc["policy"])
        except (SnapshotError, ConfigError, TypeError, ValueError) as exc:
            log.warning("episode %s: its checkpoint cannot be restored (%s); it starts over", key, exc)
            self.drop(key)
            return None
        record.steps.extend(steps)
        ctx.history.extend(doc.get("history") or [])
        record.reward = float(doc.get("reward") or 0.0)
        record.reward_components.update(doc.get("components") or {})
        ctx.t = len(steps)
        return result

    async def checkpoint(self, client: Any, key: str, record: EpisodeRecord, ctx: EpisodeContext,
                         rng: random.Random, policy: Policy) -> bool:
        """Snapshot the env and write the episode so far. ``False`` (with one warning) when the env
        cannot snapshot: the caller turns checkpoints off for the run."""
        try:
            snap = await client.snapshot()
        except (SnapshotError, ConfigError) as exc:
            if isinstance(exc, SnapshotError) and exc.reason not in ("unsupported", "episode_rubric"):
                raise
            log.warning("checkpoints are off for this run: %s", exc)
            return False
        # a policy's own state, when it can say it (built-in policies do)
        own = getattr(policy, "checkpoint", None)
        self.save(key, {"snapshot": snap, "t": ctx.t, "steps": [s.to_json() for s in record.steps],
                        "history": ctx.history, "reward": record.reward,
                        "components": dict(record.reward_components), "rng": rng_state(rng),
                        "policy": own(ctx) if own is not None else None})
        return True
