"""How the server finds an env's tasks (``tasks_of``) and the adapter for upstream-style envs.

``tasks_of(env_cls)`` answers, first match wins, the class attribute ``tasks``, the ``tasks:`` entry
of a manifest (given, or the ``openenv.yaml`` beside the class's module), or ``UpstreamTasks``
over upstream 0.10's ``list_splits`` / ``num_tasks`` / ``get_task`` / ``get_task_range`` methods.
Re-exported by ``openenv.tasks``.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from openenv.tasks import SPLIT_TYPES, SeedTasks, Split, Task, TaskError, TaskFile, TaskSource, _unknown, split_type_of

if TYPE_CHECKING:
    from openenv.manifest import Manifest

__all__ = ["UpstreamTasks", "tasks_from_manifest", "tasks_of"]


class UpstreamTasks(TaskSource):
    """An upstream-style env's ``list_splits`` / ``num_tasks`` / ``get_task`` / ``get_task_range``
    as a ``TaskSource``. One env instance answers every query (built on first use, never per
    request): upstream documents these methods as metadata-only."""

    def __init__(self, factory: Any, name: str | None = None) -> None:
        self._factory = factory
        self._env: Any = None
        self._lock = threading.Lock()
        self._name = name or getattr(factory, "__qualname__", "env")

    def describe(self) -> str:
        return f"{self._name} (upstream task methods)"

    @property
    def env(self) -> Any:
        if self._env is None:
            with self._lock:
                if self._env is None:
                    self._env = self._factory()
        return self._env

    def splits(self) -> list[Split]:
        out = []
        for item in self.env.list_splits():
            if isinstance(item, BaseModel):
                item = item.model_dump()
            if isinstance(item, Mapping):
                name = str(item.get("name"))
                kind = item.get("type")
            else:
                name, kind = str(item), None
            if kind not in SPLIT_TYPES:
                kind = split_type_of(name)
            try:
                count = int(item["num_tasks"]) if isinstance(item, Mapping) and "num_tasks" in item \
                    else int(self.env.num_tasks(name))
            except (NotImplementedError, AttributeError):
                count = 0
            out.append(Split(name=name, type=kind, num_tasks=count))
        return out

    def num_tasks(self, split: str) -> int:
        self.check_split(split)
        return int(self.env.num_tasks(split))

    def _as_task(self, split: str, index: int, spec: Any) -> Task:
        if isinstance(spec, Task):
            return spec
        if isinstance(spec, BaseModel):
            spec = spec.model_dump()
        data = dict(spec) if isinstance(spec, Mapping) else {"value": spec}
        task_id = data.get("id")
        seed = data.get("seed")
        if not (isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0):
            seed = None
        data.setdefault("index", index)  # upstream selects a task by (split, index)
        return Task(id=str(task_id) if task_id not in (None, "") else f"{split}-{index}", split=split,
                    seed=seed, data=data)

    def task_at(self, split: str, index: int) -> Task:
        self.check_split(split)
        return self._as_task(split, index, self.env.get_task(split, index))

    def task_range(self, split: str, start: int = 0, stop: int | None = None) -> list[Task]:
        self.check_split(split)
        n = self.num_tasks(split)
        first = range(n)[slice(start, stop)]
        specs = list(self.env.get_task_range(split, start, stop))
        return [self._as_task(split, i, spec) for i, spec in zip(first, specs, strict=False)]

    def validate(self) -> None:
        """Nothing up front: listing an upstream env's tasks builds it and may read a whole
        dataset, so its answers are checked as they are served."""

    def get(self, task_id: str) -> Task:
        ids: list[str] = []
        for split in self.split_names():
            for task in self.task_range(split):
                if task.id == task_id:
                    return task
                ids.append(task.id)
        raise _unknown("task_id", task_id, ids, self.split_names())


_UPSTREAM_METHODS = ("list_splits", "num_tasks", "get_task")


def tasks_from_manifest(manifest: Manifest, folder: Path) -> TaskSource | None:
    """The source ``manifest``'s ``tasks:`` declares (a file relative to ``folder``, or seeds)."""
    spec = getattr(manifest, "tasks", None)
    if spec is None:
        return None
    if spec.file is not None:
        return TaskFile(folder / spec.file, split_types=spec.split_types)
    assert spec.seeds is not None  # the manifest model requires one of file/seeds
    return SeedTasks({k: tuple(v) for k, v in spec.seeds.items()}, config=spec.config,
                     split_types=spec.split_types, name=f"{folder / 'openenv.yaml'} tasks.seeds")


def _manifest_near(cls: type) -> tuple[Manifest, Path] | None:
    """The ``openenv.yaml`` in the folder of ``cls``'s module or a package folder above it."""
    from openenv.manifest import MANIFEST_FILENAME, ManifestError, load_manifest

    module = sys.modules.get(cls.__module__)
    file = getattr(module, "__file__", None)
    if not file:
        return None
    folder = Path(file).resolve().parent
    for _ in range(cls.__module__.count(".") + 1):
        candidate = folder / MANIFEST_FILENAME
        if candidate.is_file():
            try:
                return load_manifest(candidate), folder
            except ManifestError:
                # Serving never needed the manifest before: only a broken `tasks:` stops it.
                if _declares_tasks(candidate):
                    raise
                return None
        if not (folder / "__init__.py").is_file():
            break
        folder = folder.parent
    return None


def _declares_tasks(path: Path) -> bool:
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return False
    return isinstance(data, dict) and "tasks" in data


def tasks_of(env_cls: Any, *, manifest: Manifest | None = None, folder: Path | None = None,
             factory: Any = None) -> TaskSource | None:
    """The task source of an env class (what the server serves), or None when it declares none.

    First match wins: the class attribute ``tasks`` (a ``TaskSource``); ``manifest`` (or the
    ``openenv.yaml`` beside the class's module) with a ``tasks:`` entry; upstream-style task
    methods (``list_splits``, ``num_tasks``, ``get_task``) adapted by ``UpstreamTasks`` (which
    builds one env with ``factory``, default the class, on first use).
    """
    if env_cls is None:
        return None
    declared = getattr(env_cls, "tasks", None)
    if isinstance(declared, TaskSource):
        return declared
    if declared is not None and not callable(declared):
        raise TaskError(f"{getattr(env_cls, '__qualname__', env_cls)}.tasks is {type(declared).__name__}, "
                        "not a TaskSource: set it to TaskFile(...), SeedTasks(...) or InlineTasks(...) "
                        "from openenv.tasks.")
    if manifest is not None and folder is not None:
        found = tasks_from_manifest(manifest, folder)
        if found is not None:
            return found
    elif isinstance(env_cls, type):
        near = _manifest_near(env_cls)
        if near is not None:
            found = tasks_from_manifest(*near)
            if found is not None:
                return found
    if isinstance(env_cls, type) and all(callable(getattr(env_cls, m, None)) for m in _UPSTREAM_METHODS):
        return UpstreamTasks(factory or env_cls, name=env_cls.__qualname__)
    return None
