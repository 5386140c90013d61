"""reasoning-gym's procedural tasks by name, one question per episode, scored by its own verifiers.

Promises (tested):

* ``reset(dataset="basic_arithmetic", seed=k, size=n, index=i, config={...})`` builds
  ``reasoning_gym.create_dataset(dataset, seed=k, size=n, **config)`` (cached per instance) and asks
  question ``i`` (default: drawn from ``0..n-1`` with ``random.Random(k)``): same seed, same question.
  In-process, ``task="basic_arithmetic"`` still names the dataset; a served reset says ``dataset``
  (the server reserves ``task`` for declared tasks);
* an unknown task is a ``ValidationError`` with a did-you-mean; a bad ``config`` is a
  ``ValidationError`` carrying reasoning-gym's complaint;
* ``step(answer)`` ends the episode with reward = the dataset's ``score_answer(answer, entry)``
  (0..1); an answer its verifier cannot read scores 0.0 (documented penalty) with the reason in
  ``feedback``; the reference answer is then shown;
* stepping before ``reset`` or after the answer is an ``ExecutionError`` telling you to reset;
* the declared tasks (``tasks``, ``openenv_env_reasoning_gym.tasks``) are ten generators with their
  own disjoint train/test seeds; the server's ``reset(task_id=...)`` arrives as
  ``reset(task=<openenv.tasks.Task>)`` and asks question 0 of ``create_dataset(dataset,
  seed=task.seed, size=1)``, so a task id always names the same question.
"""

from __future__ import annotations

import random
import uuid
from collections import OrderedDict
from typing import Any

import reasoning_gym
from reasoning_gym.factory import DATASETS

from openenv.env import Environment
from openenv.errors import ExecutionError, ValidationError, did_you_mean
from openenv.tasks import Task as DeclaredTask
from openenv.types import EnvironmentMetadata
from openenv_env_reasoning_gym.models import ReasoningAction, ReasoningObservation, ReasoningState
from openenv_env_reasoning_gym.tasks import SPLITS, TASK_DATASETS, DatasetSeedTasks

__all__ = ["ReasoningGymEnv", "make_dataset", "task_names"]

_CACHE_SIZE = 8


def task_names() -> list[str]:
    """Every task reasoning-gym registers, sorted."""
    return sorted(DATASETS)


def make_dataset(task: str, seed: int | None, size: int, config: dict[str, Any] | None = None) -> Any:
    """``reasoning_gym.create_dataset`` with errors turned into ``ValidationError``."""
    if task not in DATASETS:
        raise ValidationError(f"unknown reasoning-gym task {task!r}.{did_you_mean(task, DATASETS)} "
                              f"{len(DATASETS)} tasks are installed, e.g. basic_arithmetic, chain_sum, "
                              "spell_backward, sudoku, countdown")
    if not 1 <= size <= 100_000:
        raise ValidationError(f"size must be 1..100000, got {size}")
    try:
        return reasoning_gym.create_dataset(task, seed=seed, size=size, **(config or {}))
    except (TypeError, ValueError, AssertionError, KeyError) as exc:
        raise ValidationError(f"bad config for task {task!r}: {exc or type(exc).__name__}") from None


def _count(name: str, value: Any) -> int:
    """An int option of ``reset`` (at least 1), refused with a ``ValidationError`` saying what fits."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValidationError(f"{name} must be a whole number of at least 1 (e.g. {name}=10), got {value!r}")
    return value


class ReasoningGymEnv(Environment[ReasoningAction, ReasoningObservation, ReasoningState]):
    """One question per episode. Instances share nothing (each caches its own datasets)."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    tasks = DatasetSeedTasks(TASK_DATASETS, SPLITS)

    def __init__(self, *, task: str = "basic_arithmetic", size: int = 1000) -> None:
        super().__init__()
        self.default_task, self.default_size = task, size
        self._datasets: OrderedDict[tuple[Any, ...], Any] = OrderedDict()
        self._dataset: Any = None
        self._entry: dict[str, Any] | None = None
        self._task, self._size, self._index = task, size, 0
        self._seed: int | None = None
        self._done = False
        self._answers = 0
        self._episode_id: str | None = None

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> ReasoningObservation:
        """Ask a question. Keyword options: ``dataset`` (alias ``task``), ``size``, ``index``, ``config``
        (the dataset's settings); or ``task=<openenv.tasks.Task>``, a declared task."""
        unknown = set(kwargs) - {"dataset", "task", "size", "index", "config"}
        if unknown:
            raise ValidationError(f"unknown reset option(s) {sorted(unknown)}; accepted: dataset, size, index, config")
        declared = kwargs.pop("task", None)
        if isinstance(declared, str):
            # The generator's name was ``task`` before the task API existed; a served reset now names
            # it ``dataset`` (the server keeps ``task`` for declared tasks), in-process both work.
            if kwargs.setdefault("dataset", declared) != declared:
                raise ValidationError(f"dataset={kwargs['dataset']!r} and task={declared!r} disagree; give one")
        elif isinstance(declared, DeclaredTask):  # a declared task: question 0 of (dataset, seed, size 1)
            dataset = declared.data.get("dataset")
            if not isinstance(dataset, str):
                raise ValidationError(f"task {declared.id!r} names no dataset in its data; a reasoning_gym task's "
                                      "data is {\"dataset\": name, \"config\"?: {...}}")
            seed = declared.seed if declared.seed is not None else seed
            kwargs = {"dataset": dataset, "size": 1, "index": 0, "config": declared.data.get("config") or {}}
        elif declared is not None:
            raise ValidationError("task must be a dataset name or an openenv.tasks.Task, "
                                  f"got {type(declared).__name__}")
        task = str(kwargs.get("dataset", self.default_task))
        size = _count("size", kwargs.get("size", self.default_size))
        config = kwargs.get("config") or {}
        if not isinstance(config, dict):
            raise ValidationError(f"config must be a mapping of the task's settings, got {type(config).__name__}")
        if seed is None:  # a fresh random dataset, but one the oracle (and a replay) can rebuild
            seed = random.randrange(2**31)
        key = (task, seed, size, tuple(sorted((k, repr(v)) for k, v in config.items())))
        dataset = self._datasets.get(key)
        if dataset is None:
            dataset = make_dataset(task, seed, size, config)
            self._datasets[key] = dataset
            if len(self._datasets) > _CACHE_SIZE:
                self._datasets.popitem(last=False)
        index = kwargs.get("index")
        if index is None:
            index = random.Random(seed).randrange(size)
        if not isinstance(index, int) or not 0 <= index < size:
            raise ValidationError(f"index must be an int in 0..{size - 1}, got {index!r}")
        self._dataset, self._entry = dataset, dataset[index]
        self._task, self._seed, self._size, self._index = task, seed, size, index
        self._done, self._answers = False, 0
        self._episode_id = episode_id or str(uuid.uuid4())
        return self._observe(reward=0.0)

    def step(self, action: ReasoningAction, timeout_s: float | None = None, **kwargs: Any) -> ReasoningObservation:
        if self._entry is None:
            raise ExecutionError("No question asked yet: call reset() before step().")
        if self._done:
            raise ExecutionError("The question was already answered (one answer per episode): call reset().")
        self._answers += 1
        self._done = True
        try:
            score = float(self._dataset.score_answer(action.answer, self._entry))
        except Exception as exc:  # a verifier that chokes on a malformed answer: documented 0.0
            return self._observe(reward=0.0, score=0.0,
                                 feedback=f"the verifier could not read the answer ({type(exc).__name__}: {exc})")
        score = min(max(score, 0.0), 1.0)
        feedback = "correct" if score == 1.0 else "partly correct" if score > 0 else "wrong"
        return self._observe(reward=score, score=score, feedback=feedback)

    @property
    def state(self) -> ReasoningState:
        return ReasoningState(episode_id=self._episode_id, step_count=self._answers, task=self._task,
                              seed=self._seed, size=self._size, index=self._index, done=self._done)

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(name="reasoning_gym", version="0.1.0",
                                   description="reasoning-gym tasks by name, scored by reasoning-gym's verifiers.")

    def _observe(self, *, reward: float, score: float | None = None, feedback: str = "") -> ReasoningObservation:
        assert self._entry is not None
        return ReasoningObservation(
            task=self._task, question=str(self._entry["question"]), index=self._index, score=score,
            feedback=feedback, reference_answer=str(self._entry["answer"]) if self._done else None,
            task_metadata=_jsonable(self._entry.get("metadata", {})) if self._done else {},
            reward=reward, done=self._done, metadata={"seed": self._seed, "size": self._size},
        )


def _jsonable(value: Any) -> Any:
    """The entry metadata with anything JSON cannot hold turned into text."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)
