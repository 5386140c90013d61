"""The task rule of ``reset``: which task and seed an episode plays (issue 27, docs/protocol.md §13).

``TaskRule(source, env_class, ...)`` is built once per server by the ``SessionManager``; calling it
with a reset's data returns the data to hand on (``seed`` and ``task`` set, the task keys removed)
and the metadata to stamp on the first observation. The rule, the same on every transport:

* ``task_id`` resolves through the env's ``TaskSource`` (an unknown id: ``UnknownTaskError`` with
  did-you-mean and the split names; an env that declares no tasks: ``NoTasksError`` naming how to
  declare them). With ``split`` too, the task must be in that split.
* ``split`` alone picks a task of that split: deterministic from ``seed`` (or from ``group_id``)
  when given, else uniformly at random.
* ``group_id`` without ``seed`` derives the seed from the group id, so every member of a group
  plays the identical episode: same task, same seed, hence the same opponent draws.
* The env gets ``seed`` = the task's seed, else the given seed, else the derived one; and
  ``task=<Task>`` when its ``reset`` takes ``task`` (an upstream-style env gets ``split`` and
  ``index`` instead). An env without tasks never receives ``task``; only an env whose ``reset``
  names ``group_id`` receives it.
* The observation's ``metadata`` carries ``task_id``, ``split`` and ``group_id`` (those that apply).

An env without declared tasks whose own ``reset`` names ``split`` or ``task_id`` receives them
untouched (upstream envs select tasks that way).
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

from openenv.errors import RuleViolation, ValidationError
from openenv.sessions.session import signature_params
from openenv.tasks import Task, TaskSource, UpstreamTasks, no_tasks_error

__all__ = ["TASK_KEYS", "TaskRule", "group_seed"]

#: The reset keys this rule consumes.
TASK_KEYS = ("task_id", "split", "group_id")

_MAX_KEY = 255
#: Derived seeds stay below 2**31 so every RNG (numpy's legacy seeding included) accepts them.
_SEED_MASK = 0x7FFF_FFFF


def group_seed(group_id: str) -> int:
    """The seed every member of group ``group_id`` plays (stable across processes and versions)."""
    digest = hashlib.sha256(b"openenv-group\0" + group_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") & _SEED_MASK


def _pick(split: str, key: int, n: int) -> int:
    digest = hashlib.sha256(f"openenv-pick\0{split}\0{key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % n


class TaskRule:
    """Resolves the task keys of a reset for one served env (see the module docstring)."""

    def __init__(self, source: TaskSource | None, env_class: type | None, *, is_async: bool,
                 env_name: str = "env") -> None:
        self.source = source
        self.env_name = env_name
        params, var_kw = signature_params(env_class, "reset_async" if is_async else "reset")
        self._upstream = isinstance(source, UpstreamTasks)
        # An upstream-style env selects its task by (split, index); it gets `task` only by name.
        self._takes_task = "task" in params or (var_kw and not self._upstream)
        self._takes_index = var_kw or {"split", "index"} <= params
        #: Without declared tasks, keys the env's own reset names stay the env's (upstream style).
        self._env_owns = (frozenset(k for k in ("task_id", "split") if k in params) if source is None
                          else frozenset())
        # Only an env that names group_id gets it: a `**kwargs` env that refuses unknown options
        # must not fail on it (the derived seed already makes the group's episodes identical).
        self._takes_group = "group_id" in params
        if source is not None and not self._upstream and not self._takes_task and env_class is not None:
            raise RuleViolation(
                f"Environment '{env_name}' declares tasks ({source.describe()}) but its reset does not "
                "take `task`, so it could not know which task to play. Add the parameter: "
                "`def reset(self, seed=None, episode_id=None, task: Task | None = None, **kwargs)`.")
        self._random = random.Random()

    def __call__(self, data: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """``(data for reset, metadata for the observation)``; ``data`` itself is not changed."""
        if self.source is not None and "task" in data:
            raise ValidationError(
                "A reset cannot carry a `task` object: the server resolves tasks itself. Pass "
                "task_id='<id>' (or split='<name>') instead.",
                data={"errors": [{"type": "extra_forbidden", "loc": ["task"], "input": None,
                                  "msg": "Pass task_id or split instead"}]})
        if not any(k in data for k in TASK_KEYS):
            return data, {}
        data = dict(data)
        task_id = self._text(data, "task_id")
        split = self._text(data, "split")
        group_id = self._text(data, "group_id")
        if group_id is not None and self._takes_group:
            data["group_id"] = group_id  # an env that takes group_id itself sees it too
        seed = data.get("seed")
        if not (isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0):
            seed = None  # an invalid seed is refused by the reset-argument rule afterwards
        derived = group_seed(group_id) if group_id is not None and seed is None else None
        meta: dict[str, Any] = {}
        if group_id is not None:
            meta["group_id"] = group_id
        task: Task | None = None
        if task_id is not None or split is not None:
            if self.source is None:
                asked = f"task {task_id!r}" if task_id is not None else f"split {split!r}"
                raise no_tasks_error(self.env_name, f"reset to {asked}")
            task = self._choose(self.source, task_id, split, seed if seed is not None else derived)
            meta["task_id"] = task.id
            meta["split"] = task.split
        episode_seed = task.seed if task is not None and task.seed is not None else (
            seed if seed is not None else derived)
        if episode_seed is not None:
            data["seed"] = episode_seed
        if task is not None:
            if self._upstream and not self._takes_task:
                if self._takes_index:
                    data["split"] = task.split
                    data["index"] = task.data.get("index")
            else:
                data["task"] = task
        return data, meta

    def _text(self, data: dict[str, Any], key: str) -> str | None:
        if key in self._env_owns:
            return None  # the env's own parameter: left in data untouched
        value = data.pop(key, None)
        if value is None:
            return None
        if not isinstance(value, str) or not value or len(value) > _MAX_KEY:
            raise ValidationError(f"Invalid message: '{key}' must be a non-empty string of at most "
                                  f"{_MAX_KEY} characters, got {repr(value)[:80]}.", data={"errors": [{
                "type": "string_type", "loc": [key], "input": value,
                "msg": f"Input should be a non-empty string of at most {_MAX_KEY} characters"}]})
        return value

    def _choose(self, source: TaskSource, task_id: str | None, split: str | None, key: int | None) -> Task:
        if task_id is not None:
            task = source.get(task_id)
            if split is not None and task.split != split:
                raise ValidationError(
                    f"Task '{task_id}' is in split '{task.split}', not '{split}'. Pass split='{task.split}' "
                    "or leave split out when giving a task_id.",
                    data={"task_id": task_id, "split": split, "task_split": task.split})
            return task
        assert split is not None
        source.check_split(split)
        n = source.num_tasks(split)
        if n == 0:
            raise ValidationError(f"Split '{split}' of '{self.env_name}' has no tasks.",
                                  data={"split": split, "splits": source.split_names()})
        index = self._random.randrange(n) if key is None else _pick(split, key, n)
        return source.task_at(split, index)

