"""Tasks and splits: what an environment declares it can play (issue 27, docs/writing-an-env.md).

A ``Task`` is one episode definition with a stable string id, the split it belongs to, the seed it
implies (procedural envs) and the data the env needs to build it. A ``TaskSource`` lists them per
split. An env declares one of:

* ``TaskFile(path)`` – a ``.jsonl`` / ``.parquet`` file or a ``datasets`` ``save_to_disk`` folder
  shipped with the package, one row per task: ``{"id", "split", "seed"?, ...data}``;
* ``SeedTasks({"train": range(0, 10_000), "test": range(1_000_000, 1_000_500)}, config={...})`` –
  procedural envs, where a task is ``(config, seed)`` and the id is ``"<split>-<seed>"``;
* ``InlineTasks([...])`` – a short list written in code;

as the class attribute ``tasks`` of its ``Environment`` subclass, or as ``tasks:`` in its
``openenv.yaml``. Envs written for upstream OpenEnv that implement ``list_splits`` / ``list_tasks``
/ ``num_tasks`` / ``get_task`` / ``get_task_range`` are adapted (``tasks_of``).

Promises: ids are unique within a source; no id sits in two splits; no two splits share a seed
(``validate``, run by the server at start-up, so a bad task file stops ``openenv serve`` with a
``TaskError`` naming the file, row and id). An unknown task id or split raises ``UnknownTaskError``
(the wire's ``VALIDATION_ERROR``) with a did-you-mean and the split names. Sources load lazily
(declaring one in a class body costs nothing at import) and are cheap to query once loaded:
listing a split never builds an env.
"""

from __future__ import annotations

import itertools
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from openenv.errors import ConfigError, ValidationError, did_you_mean

__all__ = [
    "SPLIT_TYPES",
    "InlineTasks",
    "NoTasksError",
    "SeedTasks",
    "Split",
    "SplitType",
    "Task",
    "TaskError",
    "TaskFile",
    "TaskSource",
    "UnknownTaskError",
    "UpstreamTasks",
    "checked_task",
    "merge_task",
    "no_tasks_error",
    "split_type_of",
    "tasks_from_manifest",
    "tasks_of",
]

SplitType = Literal["train", "validation", "test"]
SPLIT_TYPES: tuple[str, ...] = ("train", "validation", "test")

#: Split names whose type is obvious; any other name is typed ``validation`` (as upstream does).
_NAMED_TYPES: dict[str, SplitType] = {
    "train": "train", "training": "train",
    "test": "test", "testing": "test", "eval": "test", "heldout": "test", "held_out": "test",
    "validation": "validation", "valid": "validation", "val": "validation", "dev": "validation",
}

#: Row keys that are the task's own fields; every other key of a row goes to ``Task.data``.
_TASK_KEYS = ("id", "split", "seed")


class Task(BaseModel):
    """One task: a stable ``id`` (unique within the env), its ``split``, the episode ``seed`` it
    implies (procedural envs; else None) and the ``data`` the env builds the episode from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1)
    split: str = Field(min_length=1)
    seed: int | None = Field(default=None, ge=0)
    data: dict[str, Any] = Field(default_factory=dict)


class Split(BaseModel):
    """A split's name, its role (``train`` / ``validation`` / ``test``) and how many tasks it has."""

    name: str
    type: SplitType
    num_tasks: int = Field(ge=0)


def checked_task(task: object, hint: str = "to play a declared task by id, reset(task_id=...) through a client",
                 ) -> Task:
    """``task`` if it is a ``Task`` (what the server hands ``reset(task=...)``), else the error an
    env gives a caller that passed something else (``hint``: what to do instead)."""
    if not isinstance(task, Task):
        raise ValidationError(f"task must be an openenv.tasks.Task, got {type(task).__name__}; {hint}")
    return task


def merge_task(task: object, seed: int | None, options: dict[str, Any]) -> tuple[int | None, dict[str, Any]]:
    """``reset(task=...)`` as plain reset options: the task's seed (else ``seed``) and its data over
    ``options``. No task: ``seed`` and ``options`` unchanged. Not a ``Task``: ``checked_task``'s error."""
    if task is None:
        return seed, options
    declared = checked_task(task)
    return (declared.seed if declared.seed is not None else seed), {**options, **declared.data}


def split_type_of(name: str, overrides: Mapping[str, str] | None = None) -> SplitType:
    """The type of split ``name``: ``overrides[name]``, else guessed from the name (``dev`` ->
    ``validation``), else ``validation`` (upstream's rule for names it does not know)."""
    if overrides and name in overrides:
        return overrides[name]  # type: ignore[return-value]  # checked by _check_split_types
    return _NAMED_TYPES.get(name.lower(), "validation")


class TaskError(ConfigError):
    """Bad task data (a duplicate id, an id in two splits, a malformed row, overlapping seeds).

    ``file``, ``row`` (1-based) and ``task_id`` say where, when known; the message names them and
    the fix. Raised at server start-up by ``TaskSource.validate``.
    """

    def __init__(self, message: str, *, file: str | None = None, row: int | None = None,
                 task_id: str | None = None) -> None:
        self.file, self.row, self.task_id = file, row, task_id
        where = ", ".join(p for p in (file, f"row {row}" if row is not None else None,
                                      f"task '{task_id}'" if task_id is not None else None) if p)
        super().__init__(f"{where}: {message}" if where else message)


class UnknownTaskError(ValidationError):
    """A task id or split name the env does not have (wire code ``VALIDATION_ERROR``).

    ``data`` carries ``task_id`` or ``split``, the env's ``splits`` and, when one is close,
    ``did_you_mean``.
    """


class NoTasksError(ValidationError):
    """The env declares no tasks, yet a task or split was asked for (wire ``VALIDATION_ERROR``,
    ``data["reason"] == "no_tasks"``)."""


def no_tasks_error(env_name: str, asked: str) -> NoTasksError:
    """The error for asking ``env_name`` (which declares no tasks) for ``asked``."""
    return NoTasksError(
        f"Environment '{env_name}' declares no tasks, so it cannot {asked}. Declare them: set "
        "`tasks = TaskFile(...)` / `SeedTasks(...)` / `InlineTasks(...)` on the env class (from "
        "openenv.tasks), or add `tasks: {file: tasks.jsonl}` or `tasks: {seeds: {train: [0, 1000]}}` "
        "to its openenv.yaml (docs/writing-an-env.md, 'Tasks and splits').",
        data={"reason": "no_tasks", "env": env_name})


def _unknown(kind: str, name: str, known: Sequence[str], splits: Sequence[str]) -> UnknownTaskError:
    hint = did_you_mean(name, known)
    listing = ", ".join(splits) if splits else "none"
    data: dict[str, Any] = {kind: name, "splits": list(splits)}
    if hint:
        data["did_you_mean"] = hint.split("'")[1]
    what = "task id" if kind == "task_id" else "split"
    fix = ("List the tasks of a split (`await env.tasks(split)`, POST /{env}/tasks) to see the ids."
           if kind == "task_id" else "Pass one of the env's splits.")
    return UnknownTaskError(f"Unknown {what} '{name}'.{hint} Splits: {listing}. {fix}", data=data)


class TaskSource(ABC):
    """What an env declares: its splits and the tasks of each. Subclasses implement ``splits``,
    ``num_tasks``, ``task_at`` and ``get``; ``task_range`` and ``validate`` have working defaults."""

    @abstractmethod
    def splits(self) -> list[Split]:
        """Every split, in declaration order."""

    @abstractmethod
    def num_tasks(self, split: str) -> int:
        """How many tasks ``split`` has (``UnknownTaskError`` for an unknown split)."""

    @abstractmethod
    def task_at(self, split: str, index: int) -> Task:
        """The task at ``index`` (0-based) of ``split``; ``IndexError`` when out of range."""

    @abstractmethod
    def get(self, task_id: str) -> Task:
        """The task with ``task_id``; ``UnknownTaskError`` (with did-you-mean) when there is none."""

    def task_range(self, split: str, start: int = 0, stop: int | None = None) -> list[Task]:
        """Tasks ``[start, stop)`` of ``split`` (slice semantics, so out-of-range bounds clip)."""
        n = self.num_tasks(split)
        return [self.task_at(split, i) for i in range(n)[slice(start, stop)]]

    def split_names(self) -> list[str]:
        return [s.name for s in self.splits()]

    def check_split(self, split: str) -> None:
        """``UnknownTaskError`` with did-you-mean when ``split`` is not one of the splits."""
        names = self.split_names()
        if split not in names:
            raise _unknown("split", split, names, names)

    def draw(self, seed: int | None) -> Task:
        """A task for a reset that named none: one of ``train`` (else of the first split) picked by
        ``seed`` (the same seed, the same task; no seed, any)."""
        import random

        names = self.split_names()
        split = "train" if "train" in names else names[0]
        return self.task_at(split, random.Random(seed).randrange(self.num_tasks(split)))

    def iter_tasks(self) -> Iterator[Task]:
        for split in self.split_names():
            n = self.num_tasks(split)
            for i in range(n):
                yield self.task_at(split, i)

    def validate(self) -> None:
        """Check the whole source: a duplicate id or an id in two splits raises ``TaskError``."""
        seen: dict[str, str] = {}
        for task in self.iter_tasks():
            _check_unique(seen, task, source=self.describe())

    def describe(self) -> str:
        """Where the tasks come from, for error messages."""
        return type(self).__name__


def _check_unique(seen: dict[str, str], task: Task, *, source: str, row: int | None = None) -> None:
    other = seen.get(task.id)
    if other is None:
        seen[task.id] = task.split
    elif other == task.split:
        raise TaskError(f"duplicate task id in split '{task.split}': ids must be unique. Rename one.",
                        file=source, row=row, task_id=task.id)
    else:
        raise TaskError(f"the id is in both split '{other}' and split '{task.split}': splits must be "
                        "disjoint (a test task seen in training measures nothing). Keep it in one.",
                        file=source, row=row, task_id=task.id)


def _check_split_types(types: Mapping[str, str] | None, source: str) -> dict[str, SplitType]:
    out: dict[str, SplitType] = {}
    for name, kind in (types or {}).items():
        if kind not in SPLIT_TYPES:
            raise TaskError(f"split '{name}' has type '{kind}';{did_you_mean(kind, SPLIT_TYPES)} a split "
                            f"type is one of {', '.join(SPLIT_TYPES)}.", file=source)
        out[name] = kind  # type: ignore[assignment]
    return out


class _ListedTasks(TaskSource):
    """A source whose tasks are all in memory (files, inline lists): loaded once, then indexed."""

    def __init__(self, split_types: Mapping[str, str] | None = None) -> None:
        self._split_types_raw = dict(split_types or {})
        self._lock = threading.Lock()
        self._by_split: dict[str, list[Task]] | None = None
        self._by_id: dict[str, Task] = {}

    @abstractmethod
    def _rows(self) -> Iterable[tuple[int, Any]]:
        """``(row number, raw row)`` pairs; a row is a ``Task`` or a mapping."""

    def _load(self) -> dict[str, list[Task]]:
        loaded = self._by_split
        if loaded is not None:
            return loaded
        with self._lock:  # two first requests at once must not both parse a large file
            if self._by_split is not None:
                return self._by_split
            source = self.describe()
            types = _check_split_types(self._split_types_raw, source)
            by_split: dict[str, list[Task]] = {}
            seen: dict[str, str] = {}
            by_id: dict[str, Task] = {}
            for row, raw in self._rows():
                task = _task_from_row(raw, source=source, row=row)
                _check_unique(seen, task, source=source, row=row)
                by_split.setdefault(task.split, []).append(task)
                by_id[task.id] = task
            unknown = sorted(set(types) - set(by_split))
            if unknown:
                raise TaskError(f"split_types names split(s) {', '.join(unknown)} that no task has;"
                                f"{did_you_mean(unknown[0], by_split)} Splits found: "
                                f"{', '.join(by_split) or 'none'}.", file=source)
            self._split_types = types
            self._by_id = by_id
            self._by_split = by_split
            return by_split

    def splits(self) -> list[Split]:
        return [Split(name=name, type=split_type_of(name, self._split_types), num_tasks=len(tasks))
                for name, tasks in self._load().items()]

    def _split(self, split: str) -> list[Task]:
        by_split = self._load()
        tasks = by_split.get(split)
        if tasks is None:
            raise _unknown("split", split, list(by_split), list(by_split))
        return tasks

    def num_tasks(self, split: str) -> int:
        return len(self._split(split))

    def task_at(self, split: str, index: int) -> Task:
        tasks = self._split(split)
        if not 0 <= index < len(tasks):
            raise IndexError(f"Task index {index} is out of range for split '{split}' "
                             f"({len(tasks)} tasks: 0..{len(tasks) - 1}).")
        return tasks[index]

    def task_range(self, split: str, start: int = 0, stop: int | None = None) -> list[Task]:
        return self._split(split)[slice(start, stop)]

    def get(self, task_id: str) -> Task:
        by_split = self._load()
        task = self._by_id.get(task_id)
        if task is None:
            raise _unknown("task_id", task_id, list(self._by_id), list(by_split))
        return task

    def validate(self) -> None:
        self._load()  # loading checks every row, id and split


def _task_from_row(raw: Any, *, source: str, row: int) -> Task:
    if isinstance(raw, Task):
        return raw
    if not isinstance(raw, Mapping):
        raise TaskError(f"a task row must be an object with 'id' and 'split', got {type(raw).__name__}.",
                        file=source, row=row)
    task_id = raw.get("id")
    if isinstance(task_id, int) and not isinstance(task_id, bool):
        task_id = str(task_id)  # datasets often number their rows; the id is the number's text
    label = task_id if isinstance(task_id, str) else None
    if not isinstance(task_id, str) or not task_id:
        raise TaskError(f"the row has no usable 'id' (got {raw.get('id')!r}): every task needs a "
                        "stable non-empty string id.", file=source, row=row)
    split = raw.get("split")
    if not isinstance(split, str) or not split:
        raise TaskError(f"the row has no usable 'split' (got {split!r}): name the split it belongs "
                        "to, e.g. \"split\": \"train\".", file=source, row=row, task_id=label)
    seed = raw.get("seed")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or seed < 0):
        raise TaskError(f"'seed' must be a non-negative integer or absent, got {seed!r}.",
                        file=source, row=row, task_id=label)
    if "data" in raw and set(raw) <= {*_TASK_KEYS, "data"} and isinstance(raw["data"], Mapping):
        data = dict(raw["data"])  # a row already in Task's own shape
    else:
        data = {k: v for k, v in raw.items() if k not in _TASK_KEYS}
    return Task(id=task_id, split=split, seed=seed, data=data)


class InlineTasks(_ListedTasks):
    """Tasks written in code: ``InlineTasks([Task(...), {"id": ..., "split": ..., ...}, ...])``."""

    def __init__(self, tasks: Iterable[Task | Mapping[str, Any]], *,
                 split_types: Mapping[str, str] | None = None, name: str = "inline tasks") -> None:
        super().__init__(split_types)
        self._raw = list(tasks)
        self._name = name

    def _rows(self) -> Iterable[tuple[int, Any]]:
        return enumerate(self._raw, start=1)

    def describe(self) -> str:
        return self._name


class TaskFile(_ListedTasks):
    """Tasks read from ``path``: ``.jsonl`` (one JSON object a line), ``.parquet`` (needs
    ``pyarrow``) or a folder written by ``datasets``' ``save_to_disk`` (needs ``datasets``; a
    ``DatasetDict``'s keys give the split of rows without a ``split`` column).

    Read on first use (or ``validate()``), not at construction, so a class attribute costs nothing
    at import. ``split_types`` types splits whose name does not say it (``{"dev": "validation"}``).
    """

    def __init__(self, path: str | Path, *, split_types: Mapping[str, str] | None = None) -> None:
        super().__init__(split_types)
        self.path = Path(path)

    def describe(self) -> str:
        return str(self.path)

    def _rows(self) -> Iterable[tuple[int, Any]]:
        from openenv.task_files import read_rows

        return read_rows(self.path)


class SeedTasks(TaskSource):
    """Procedural tasks: each split is a range of seeds, a task is ``(config, seed)``.

    ``SeedTasks({"train": range(0, 10_000), "test": range(1_000_000, 1_000_500)}, config={...})``;
    a range may also be written ``[start, stop)`` as a two-item list. The task id is
    ``"<split>-<seed>"``, ``Task.seed`` the seed and ``Task.data`` the config. Splits that share a
    seed are refused at construction (``TaskError``): a shared seed is a shared episode.
    """

    def __init__(self, splits: Mapping[str, range | Sequence[int]], *, config: Mapping[str, Any] | None = None,
                 split_types: Mapping[str, str] | None = None, name: str = "seed tasks") -> None:
        self._name = name
        self.config = dict(config or {})
        self._ranges: dict[str, range] = {}
        for split, spec in splits.items():
            self._ranges[split] = self._as_range(split, spec)
        if not self._ranges:
            raise TaskError("no splits: give at least one, e.g. {'train': range(0, 1000)}.", file=name)
        self._types = _check_split_types(split_types, name)
        unknown = sorted(set(self._types) - set(self._ranges))
        if unknown:
            raise TaskError(f"split_types names unknown split(s) {', '.join(unknown)}.", file=name)
        self.validate()

    def _as_range(self, split: str, spec: range | Sequence[int]) -> range:
        if "-" in split and not split.replace("-", "").strip():
            raise TaskError(f"split name {split!r} is not usable.", file=self._name)
        if isinstance(spec, range):
            r = spec
        elif (isinstance(spec, Sequence) and len(spec) == 2
              and all(isinstance(v, int) and not isinstance(v, bool) for v in spec)):
            r = range(spec[0], spec[1])
        else:
            raise TaskError(f"split '{split}': seeds must be a range or [start, stop], got {spec!r}.",
                            file=self._name)
        if r.step != 1 and r.step < 1:
            raise TaskError(f"split '{split}': the seed range must count upwards.", file=self._name)
        if len(r) == 0:
            raise TaskError(f"split '{split}': the seed range {r} is empty; write [start, stop) with "
                            "start < stop.", file=self._name)
        if r.start < 0:
            raise TaskError(f"split '{split}': seeds must be >= 0, the range starts at {r.start}.",
                            file=self._name)
        return r

    def describe(self) -> str:
        return self._name

    def splits(self) -> list[Split]:
        return [Split(name=name, type=split_type_of(name, self._types), num_tasks=len(r))
                for name, r in self._ranges.items()]

    def _range(self, split: str) -> range:
        r = self._ranges.get(split)
        if r is None:
            names = list(self._ranges)
            raise _unknown("split", split, names, names)
        return r

    def _task(self, split: str, seed: int) -> Task:
        return Task(id=f"{split}-{seed}", split=split, seed=seed, data=dict(self.config))

    def num_tasks(self, split: str) -> int:
        return len(self._range(split))

    def task_at(self, split: str, index: int) -> Task:
        r = self._range(split)
        if not 0 <= index < len(r):
            raise IndexError(f"Task index {index} is out of range for split '{split}' "
                             f"({len(r)} tasks: 0..{len(r) - 1}).")
        return self._task(split, r[index])

    def task_range(self, split: str, start: int = 0, stop: int | None = None) -> list[Task]:
        return [self._task(split, seed) for seed in self._range(split)[slice(start, stop)]]

    def get(self, task_id: str) -> Task:
        split, sep, seed_text = task_id.rpartition("-")
        r = self._ranges.get(split) if sep else None
        if r is not None and seed_text.isdigit() and int(seed_text) in r and str(int(seed_text)) == seed_text:
            return self._task(split, int(seed_text))
        names = list(self._ranges)
        # Suggest from the ids near the asked seed rather than listing millions of ids.
        near: list[str] = []
        if seed_text.isdigit():
            for name, rr in self._ranges.items():
                if len(rr):
                    clipped = min(max(int(seed_text), rr[0]), rr[-1])
                    near.append(f"{name}-{clipped}")
        err = _unknown("task_id", task_id, near, names)
        err.message += (" Seed task ids are '<split>-<seed>' with the seed inside the split's range: "
                        + ", ".join(f"{n} [{r_.start}, {r_.stop})" for n, r_ in self._ranges.items()) + ".")
        err.data["message"] = err.message
        raise err

    def validate(self) -> None:
        ordered = sorted(self._ranges.items(), key=lambda kv: kv[1].start)
        for (a, ra), (b, rb) in itertools.pairwise(ordered):
            if ra.step == 1 and rb.step == 1 and rb.start < ra.stop:
                raise TaskError(f"splits '{a}' [{ra.start}, {ra.stop}) and '{b}' [{rb.start}, {rb.stop}) "
                                "share seeds; a shared seed is a shared episode, so splits must be "
                                "disjoint. Move one range.", file=self._name)
            if (ra.step != 1 or rb.step != 1) and set(ra) & set(rb):
                raise TaskError(f"splits '{a}' and '{b}' share seeds; make the ranges disjoint.",
                                file=self._name)


# The adapters and discovery live in openenv.task_discovery (which builds on the classes above);
# importing them here keeps `from openenv.tasks import tasks_of` the one spelling.
from openenv.task_discovery import UpstreamTasks, tasks_from_manifest, tasks_of  # noqa: E402
