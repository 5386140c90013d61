"""The rollout record (schema ``openenv.rollout/3``) and its JSONL file: written one episode per line,
flushed and fsynced per episode, read back tolerating a torn last line (a run killed mid-write).

A record is a plain dict (JSON types only); see the package README for every field. Version 2
added ``task_id``, ``split``, ``group_id`` and ``sample`` to the episode and ``llm`` (token usage,
token ids, logprobs) to each step; version 3 added ``samples`` (the training samples of an agent
run behind the capture gateway: token ids, loss mask, logprobs per branch). Versions 1 and 2 are
still read (their records lack the newer keys).
"""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field, fields, is_dataclass
from pathlib import Path
from typing import Any

import orjson

__all__ = ["READABLE_SCHEMAS", "SCHEMA", "EpisodeRecord", "RolloutWriter", "StepRecord", "UnwritableRecord",
           "read_records", "repair"]

#: Version of the record layout; bumped on any incompatible change.
SCHEMA = "openenv.rollout/3"
#: Versions ``read_records`` accepts (``/1``: before tasks, groups and token data; ``/2``: before samples).
READABLE_SCHEMAS = ("openenv.rollout/1", "openenv.rollout/2", SCHEMA)


def _jsonable(value: Any) -> Any:
    """``value`` as JSON types (models dumped, non-finite floats as None, unknown objects as str).

    The slow path of ``encode_line``, for what orjson refuses (integers beyond 64 bits, ...).
    """
    if hasattr(value, "model_dump"):
        value = value.model_dump()
    if is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in fields(value)}
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def _default(value: Any) -> Any:
    """What orjson does not know: models dumped, numpy values as lists/numbers, anything else as str."""
    if hasattr(value, "model_dump"):
        return value.model_dump()
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        return tolist()
    return str(value)


# orjson writes non-finite floats as null, as _jsonable does. Keys that are not strings make it
# raise; the retry turns them into strings (OPT_NON_STR_KEYS on every record costs a third more).
_OPTS = orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_APPEND_NEWLINE
_OPTS_ANY_KEYS = _OPTS | orjson.OPT_NON_STR_KEYS


@dataclass
class StepRecord:
    """One step: the observation the policy saw, the action it chose and what the env answered.

    The fields are the step's JSON object, in this order: orjson encodes the dataclass itself, so
    there is no per-step dict (and no ``slots``: orjson reads a plain instance's ``__dict__`` at
    once, slots one ``getattr`` at a time, 2.5x slower); ``collect`` rounds the timings to
    microseconds.
    """

    t: int
    observation: Any
    action: Any
    reward: float | None
    components: dict[str, float]
    done: bool
    env_s: float
    policy_s: float
    #: What the model said about this step's answer (the ``llm`` policy): ``usage`` (token counts),
    #: and when the endpoint returns them ``token_ids``, ``logprobs``, ``prompt_token_ids``. None for
    #: policies that are not models.
    llm: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The step as written (JSON types only)."""
        doc: dict[str, Any] = orjson.loads(_encode(self))
        return doc


@dataclass
class EpisodeRecord:
    """One episode (one JSONL line)."""

    key: str
    episode: int
    env: str
    policy: str
    seed: int | None
    task: dict[str, Any] | None
    task_id: str | None = None
    split: str | None = None
    group_id: str | None = None
    sample: int | None = None
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
    #: Training samples (``openenv.sample/1`` dicts, ``openenv_gateway.samples``) of an agent whose
    #: model calls went through the capture gateway; None for episodes played step by step.
    samples: list[dict[str, Any]] | None = None

    @property
    def num_steps(self) -> int:
        return len(self.steps)

    def _doc(self) -> dict[str, Any]:
        # steps stay StepRecords: orjson encodes them without a Python call per step
        return {
            "schema": SCHEMA, "key": self.key, "episode": self.episode, "env": self.env,
            "policy": self.policy, "seed": self.seed, "task": self.task, "task_id": self.task_id,
            "split": self.split, "group_id": self.group_id, "sample": self.sample, "status": self.status,
            "error": self.error, "attempts": self.attempts, "reward": self.reward,
            "reward_components": self.reward_components, "num_steps": self.num_steps,
            "done": self.done, "truncated": self.truncated, "final_observation": self.final_observation,
            "started_at": round(self.started_at, 3), "duration_s": round(self.duration_s, 6),
            "steps": self.steps, "samples": self.samples,
        }

    def to_line(self) -> bytes:
        """The record as one JSONL line (UTF-8, ending in a newline): exactly what the writer writes."""
        return _encode(self._doc())

    def to_json(self) -> dict[str, Any]:
        """The record as written (JSON types only)."""
        doc: dict[str, Any] = orjson.loads(self.to_line())
        return doc


class UnwritableRecord(ValueError):
    """A record holds a value that JSON cannot represent (a structure that contains itself)."""


def _encode(value: Any) -> bytes:
    """One JSON line; one orjson call, or the standard library for what orjson refuses."""
    try:
        return orjson.dumps(value, default=_default, option=_OPTS)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        pass
    try:
        return orjson.dumps(value, default=_default, option=_OPTS_ANY_KEYS)
    except TypeError as exc:
        try:
            return (json.dumps(_jsonable(value), separators=(",", ":"), allow_nan=False) + "\n").encode()
        except (RecursionError, ValueError):
            raise UnwritableRecord(f"not representable as JSON: {exc}") from None


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
        if not isinstance(doc, dict) or doc.get("schema") not in READABLE_SCHEMAS:
            found = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
            raise ValueError(f"{path}:{number}: not an openenv.rollout record (schema={found!r}); this "
                             f"version reads {', '.join(READABLE_SCHEMAS)}.")
        yield doc


class RolloutWriter:
    """Appends records to a JSONL file, one line per record.

    ``write`` encodes the record (one orjson call) and hands the line to the kernel with one
    ``write(2)`` before it returns, so a ``kill -9`` at any later moment leaves the record in the
    file; a kill during the call leaves at most one torn last line (``repair``). A background
    thread fsyncs the file (against a machine crash) whenever lines were written since its last
    fsync, at most every ``sync_every_s``: a burst of episodes costs one fsync, not one each, and
    a line reaches the disk within about ``sync_every_s`` plus one fsync. ``close`` fsyncs what
    is left before it returns.

    Neither the encoding nor the ``write`` runs on that thread: Python code there would hold the
    GIL that the event loop needs back after every socket call, and waking a thread per episode
    costs more than the ``write`` itself (a few microseconds into the page cache).
    """

    def __init__(self, path: Path, *, append: bool, sync_every_s: float = 0.05,
                 image_fields: Collection[str] = ()) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        if append:
            repair(path)
        self.path = path
        #: Stores the observations' declared image fields as files (``openenv_rollouts.images``);
        #: None when the env declares none.
        self.images = None
        if image_fields:
            from openenv_rollouts.images import ImageStore

            self.images = ImageStore(path, image_fields)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else os.O_TRUNC), 0o644)
        self.written = 0
        self.synced = 0
        self._sync_every_s = sync_every_s
        self._dirty = threading.Event()
        self._closing = threading.Event()
        self._lock = threading.Lock()  # one fsync at a time: the thread's, or close()'s last one
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._sync_loop, name="rollout-fsync", daemon=True)
        self._thread.start()

    def _sync_loop(self) -> None:
        while True:
            self._dirty.wait()
            if self._closing.is_set():
                return
            self._dirty.clear()
            try:
                self._sync()
            except OSError as exc:  # reported by the next write() or close()
                self._error = exc
                return
            self._closing.wait(self._sync_every_s)

    def _sync(self) -> None:
        with self._lock:
            count = self.written
            os.fsync(self._fd)
            self.synced = count

    def write(self, record: EpisodeRecord) -> None:
        """Write ``record`` as one line (``UnwritableRecord`` if it cannot be encoded: nothing is
        written then; ``OSError`` if the file cannot be written)."""
        if self._error is not None:
            raise OSError(f"writing {self.path} failed: {self._error}") from self._error
        if self.images is not None:
            # Before the line is encoded: the image files exist before any record points at them.
            for step in record.steps:
                step.observation = self.images.externalize(step.observation)
            record.final_observation = self.images.externalize(record.final_observation)
        data = memoryview(record.to_line())
        while data:  # a regular file takes the whole line at once; the loop is for the rule, not the case
            data = data[os.write(self._fd, data):]
        self.written += 1
        self._dirty.set()

    def close(self) -> None:
        self._closing.set()
        self._dirty.set()
        self._thread.join()
        try:
            if self._error is None and self.synced < self.written:
                self._sync()
        finally:
            os.close(self._fd)
        if self._error is not None:
            raise OSError(f"writing {self.path} failed: {self._error}") from self._error

    def __enter__(self) -> RolloutWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
