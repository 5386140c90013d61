"""The rollout record (schema ``openenv.rollout/1``) and its JSONL file: written one episode per line,
flushed and fsynced per episode, read back tolerating a torn last line (a run killed mid-write).

A record is a plain dict (JSON types only); see the package README for every field.
"""

from __future__ import annotations

import json
import math
import os
import queue
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

__all__ = ["SCHEMA", "EpisodeRecord", "RolloutWriter", "StepRecord", "read_records", "repair"]

#: Version of the record layout; bumped on any incompatible change.
SCHEMA = "openenv.rollout/1"


def _jsonable(value: Any) -> Any:
    """``value`` as JSON types (models dumped, non-finite floats as None, unknown objects as str)."""
    if hasattr(value, "model_dump"):
        value = value.model_dump()
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


@dataclass
class StepRecord:
    """One step: the observation the policy saw, the action it chose and what the env answered."""

    t: int
    observation: Any
    action: Any
    reward: float | None
    components: dict[str, float]
    done: bool
    env_s: float
    policy_s: float

    def to_json(self) -> dict[str, Any]:
        # observations come off the wire as JSON already; actions may be models
        action = self.action if isinstance(self.action, dict) else _jsonable(self.action)
        return {"t": self.t, "observation": self.observation, "action": action,
                "reward": self.reward, "components": dict(self.components), "done": self.done,
                "env_s": round(self.env_s, 6), "policy_s": round(self.policy_s, 6)}


@dataclass
class EpisodeRecord:
    """One episode (one JSONL line)."""

    key: str
    episode: int
    env: str
    policy: str
    seed: int | None
    task: dict[str, Any] | None
    status: str = "ok"
    error: dict[str, Any] | None = None
    attempts: int = 1
    reward: float = 0.0
    reward_components: dict[str, float] = field(default_factory=dict)
    done: bool = False
    truncated: bool = False
    final_observation: Any = None
    started_at: float = 0.0
    duration_s: float = 0.0
    steps: list[StepRecord] = field(default_factory=list)

    @property
    def num_steps(self) -> int:
        return len(self.steps)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA, "key": self.key, "episode": self.episode, "env": self.env,
            "policy": self.policy, "seed": self.seed, "task": _jsonable(self.task), "status": self.status,
            "error": _jsonable(self.error), "attempts": self.attempts, "reward": self.reward,
            "reward_components": dict(self.reward_components), "num_steps": self.num_steps,
            "done": self.done, "truncated": self.truncated,
            "final_observation": _jsonable(self.final_observation),
            "started_at": round(self.started_at, 3), "duration_s": round(self.duration_s, 6),
            "steps": [s.to_json() for s in self.steps],
        }


def repair(path: Path) -> int:
    """Cut a torn last line (no trailing newline, or not JSON) off ``path``; returns bytes removed."""
    if not path.exists():
        return 0
    data = path.read_bytes()
    keep = len(data)
    if data and not data.endswith(b"\n"):
        keep = data.rfind(b"\n") + 1
    else:
        last_start = data.rfind(b"\n", 0, max(len(data) - 1, 0)) + 1
        if data[last_start:].strip():
            try:
                json.loads(data[last_start:])
            except ValueError:
                keep = last_start
    if keep < len(data):
        with path.open("r+b") as f:
            f.truncate(keep)
    return len(data) - keep


def read_records(path: Path) -> Iterator[dict[str, Any]]:
    """Every complete record of ``path``; a torn last line is skipped, a bad line elsewhere raises."""
    with path.open("rb") as f:
        lines = f.read().split(b"\n")
    for number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            doc = json.loads(raw)
        except ValueError:
            if number == len(lines):  # the torn tail of a killed run
                return
            raise ValueError(f"{path}:{number}: not a JSON line; the file is damaged before its end.") from None
        if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
            raise ValueError(f"{path}:{number}: not an {SCHEMA} record (schema={doc.get('schema')!r}).")
        yield doc


class RolloutWriter:
    """Appends records to a JSONL file; each record is one line, flushed and fsynced, so a
    ``kill -9`` leaves every finished episode on disk and at most one torn line (``repair``).

    Records are encoded and written on a writer thread, in the order ``write`` was called, so the
    caller's event loop never waits for the disk; ``close`` waits until all are on disk.
    """

    def __init__(self, path: Path, *, append: bool) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        if append:
            repair(path)
        self.path = path
        self._file: IO[str] = path.open("a" if append else "w", encoding="utf-8")
        self.written = 0
        self._queue: queue.SimpleQueue[EpisodeRecord | None] = queue.SimpleQueue()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._drain, name="rollout-writer", daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        while True:
            record = self._queue.get()
            if record is None:
                return
            batch = [record]
            while not self._queue.empty() and len(batch) < 256:  # whatever finished meanwhile: one fsync
                nxt = self._queue.get()
                if nxt is None:
                    self._queue.put(None)
                    break
                batch.append(nxt)
            try:
                self._file.write("".join(json.dumps(r.to_json(), separators=(",", ":"), allow_nan=False,
                                                    default=str) + "\n" for r in batch))
                self._file.flush()
                os.fsync(self._file.fileno())
                self.written += len(batch)
            except BaseException as exc:  # reported by close(); the run must not lose it silently
                self._error = exc
                return

    def write(self, record: EpisodeRecord) -> None:
        if self._error is not None:
            raise OSError(f"writing {self.path} failed: {self._error}") from self._error
        self._queue.put(record)

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join()
        self._file.close()
        if self._error is not None:
            raise OSError(f"writing {self.path} failed: {self._error}") from self._error

    def __enter__(self) -> RolloutWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
