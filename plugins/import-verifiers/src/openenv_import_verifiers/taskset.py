"""Everything that touches verifiers (0.4's ``verifiers.v1`` API), in one place.

``TasksetHandle.load(module)`` finds the module's ``Taskset`` subclass the way verifiers does (the one
subclass its ``__all__`` exports), builds it with its default config, and then rebuilds tasks from
their JSON and scores a reply with the task's own ``@vf.reward`` / ``@vf.metric`` functions.
"""

from __future__ import annotations

import importlib
import itertools
from dataclasses import dataclass, field
from typing import Any

from openenv.errors import ConfigError, ExecutionError

__all__ = ["Scored", "TasksetHandle", "VerifiersImportError"]


class VerifiersImportError(ConfigError):
    """A module that is not a verifiers taskset we can serve; the message says why and what to do."""


@dataclass
class Scored:
    """A reply's score: verifiers' total and its parts."""

    reward: float
    rewards: dict[str, float] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)


def _verifiers() -> Any:
    try:
        return importlib.import_module("verifiers.v1")
    except ImportError:
        raise VerifiersImportError("verifiers 0.4 is not installed here (no module verifiers.v1): "
                                   "`pip install 'verifiers>=0.4,<0.5'` next to openenv") from None


def _import_module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name and (name == exc.name or name.startswith(exc.name + ".")):
            raise VerifiersImportError(
                f"no module named {name!r}: install the package that holds the taskset, or put its "
                f"folder on PYTHONPATH (e.g. `PYTHONPATH=path/to/src openenv import verifiers:{name}`)") from None
        raise VerifiersImportError(f"module {name!r} needs {exc.name!r}, which is not installed: "
                                   "install the distribution that provides it and import again") from None
    except Exception as exc:  # the module's own import-time code (e.g. an ImportError naming its extra)
        raise VerifiersImportError(f"importing {name!r} failed: {_one_line(exc)}") from exc


def _one_line(exc: BaseException) -> str:
    """``Type: message`` on one line (pydantic's multi-line validation errors included)."""
    lines = [line.strip() for line in str(exc).splitlines()]
    kept = [line for line in lines if line and not line.startswith("For further information visit")]
    return f"{type(exc).__name__}: {'; '.join(kept)}" if kept else type(exc).__name__


class TasksetHandle:
    """A verifiers taskset module, loaded: its ``Taskset`` instance and task class."""

    def __init__(self, module: str, taskset: Any) -> None:
        self.module, self.taskset = module, taskset
        self.task_type: Any = type(taskset).task_type()
        self.data_type: Any = self.task_type.data_type()

    @classmethod
    def load(cls, module: str) -> TasksetHandle:
        vf = _verifiers()
        mod = _import_module(module)
        exported = [getattr(mod, n, None) for n in getattr(mod, "__all__", None) or ()]
        found = [c for c in exported if isinstance(c, type) and issubclass(c, vf.Taskset) and c is not vf.Taskset]
        if not found:
            if callable(getattr(mod, "load_environment", None)):
                raise VerifiersImportError(
                    f"module {module!r} has verifiers' old load_environment() API (verifiers < 0.2), which "
                    "verifiers 0.4 no longer runs: port it to a vf.Taskset subclass exported in __all__ "
                    "(verifiers' v1 guide), then import again")
            raise VerifiersImportError(
                f"module {module!r} exports no verifiers Taskset subclass (and has no load_environment): "
                f"a taskset module lists its vf.Taskset subclass in __all__, e.g. __all__ = ['MyTaskset']")
        if len(found) > 1:
            names = ", ".join(c.__name__ for c in found)
            raise VerifiersImportError(f"module {module!r} exports {len(found)} Taskset subclasses ({names}): "
                                       "export exactly one in __all__, as verifiers requires")
        taskset_cls = found[0]
        from verifiers.v1.configs.taskset import TasksetConfig
        from verifiers.v1.utils.generic import concrete_type

        config_cls = concrete_type(taskset_cls, TasksetConfig) or TasksetConfig
        try:
            taskset = taskset_cls(config_cls(id=module))
        except Exception as exc:  # the taskset's own constructor: report it, with its words
            raise VerifiersImportError(f"{taskset_cls.__name__}({config_cls.__name__}()) failed: {_one_line(exc)} "
                                       "(an imported taskset is built from its config's defaults: wrap it in a "
                                       "module whose Taskset sets the fields it needs)") from exc
        handle = cls(module, taskset)
        if getattr(handle.task_type, "NEEDS_CONTAINER", False):
            raise VerifiersImportError(f"{handle.task_type.__name__} needs a container (NEEDS_CONTAINER): its "
                                       "episodes run in a verifiers runtime, which an imported env cannot serve; "
                                       "only tasks scored from the reply import")
        return handle

    def iter_tasks(self, limit: int) -> list[Any]:
        """The taskset's tasks in ``load()`` order, at most ``limit`` (an infinite taskset is refused)."""
        if getattr(self.taskset, "INFINITE", False):
            raise VerifiersImportError(f"{type(self.taskset).__name__} is infinite: an imported env lists its "
                                       "tasks, so wrap it in a finite taskset (or one whose load() stops)")
        try:
            return list(itertools.islice(iter(self.taskset), limit))
        except VerifiersImportError:
            raise
        except Exception as exc:  # the taskset's own load(): its words, on one line
            raise VerifiersImportError(f"{type(self.taskset).__name__}.load() failed: {_one_line(exc)}") from exc

    def reward_range(self, task: Any) -> tuple[float, float] | None:
        """The range of ``task``'s total if each ``@vf.reward`` scores in [0, 1] (verifiers'
        convention): weights summed by sign. None when judges also score (their range is theirs)."""
        if task.config.judges:
            return None
        weights = [float(getattr(fn, "_vf_weight", 1.0)) for fn in task.hooks("reward")]
        if not weights:
            return None
        return float(sum(w for w in weights if w < 0)), float(sum(w for w in weights if w > 0))

    def task_from_json(self, data: dict[str, Any]) -> Any:
        """The verifiers task of a tasks.jsonl row's ``data``."""
        return self.task_type(self.data_type.model_validate(data), self.taskset.config.task)

    async def score(self, task: Any, completion: str) -> Scored:
        """Score ``completion`` as the trace's final reply with the task's rewards and metrics."""
        from verifiers.v1.configs.agent import AgentConfig
        from verifiers.v1.errors import TaskError
        from verifiers.v1.trace import AgentInfo, Trace, TraceTask

        trace = Trace(task=TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
                      agent=AgentInfo(config=AgentConfig()))
        # The reply a reward reads (trace.last_reply); an imported env has no model-call graph.
        trace.root_reply = completion
        try:
            await task.score(trace)
        except TaskError as exc:
            raise ExecutionError(f"the verifiers task's scoring failed: {exc}") from None
        rewards = {name: r.value for name, r in trace.rewards.items() if r is not None}
        metrics = {name: float(v) for name, v in trace.metrics.items() if v is not None}
        return Scored(reward=float(trace.reward), rewards=rewards, metrics=metrics)
