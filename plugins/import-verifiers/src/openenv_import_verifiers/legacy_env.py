"""The env class of packages imported from verifiers' old API (``load_environment`` modules).

Same wire as ``VerifiersEnv`` (action ``{"completion": text}``, the same observation): ``reset``
shows a dataset row's prompt (system prompt and few-shot included, as verifiers formatted it);
``step`` ends the episode with the env's own rubric's score of the reply (``LegacyHandle.score``).
The env is built once per process (``load_environment`` with the import's arguments) and shared by
the sessions: a rubric scores each reply from its own state.
"""

from __future__ import annotations

import json
import threading
import uuid
from typing import Any, ClassVar

from openenv.env import Environment
from openenv.errors import ExecutionError, ValidationError
from openenv.tasks import Task, TaskSource
from openenv.types import EnvironmentMetadata
from openenv_import_verifiers._sync import run_sync
from openenv_import_verifiers.env import VerifiersAction, VerifiersObservation, VerifiersState
from openenv_import_verifiers.legacy import LegacyHandle

__all__ = ["LegacyVerifiersEnv"]

_HANDLES: dict[str, LegacyHandle] = {}
_LOCK = threading.Lock()


def _handle(module: str, args: dict[str, Any]) -> LegacyHandle:
    key = json.dumps([module, args], sort_keys=True)
    with _LOCK:
        if key not in _HANDLES:
            _HANDLES[key] = LegacyHandle.load(module, args)
        return _HANDLES[key]


def _text(prompt: Any) -> str:
    if isinstance(prompt, str):
        return prompt
    parts = [m.get("content") for m in prompt or [] if isinstance(m, dict) and m.get("role") != "system"]
    return "\n\n".join(p for p in parts if isinstance(p, str))


def _system(prompt: Any) -> str | None:
    if isinstance(prompt, list):
        for m in prompt:
            if isinstance(m, dict) and m.get("role") == "system" and isinstance(m.get("content"), str):
                return str(m["content"])
    return None


class LegacyVerifiersEnv(Environment[VerifiersAction, VerifiersObservation, VerifiersState]):
    """Subclasses set ``env_module`` (a module with ``load_environment``), ``env_args`` and ``tasks``."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    env_module: ClassVar[str] = ""
    env_args: ClassVar[dict[str, Any]] = {}
    tasks: ClassVar[TaskSource | None] = None

    def __init__(self) -> None:
        super().__init__()
        if not self.env_module:
            raise ValidationError(f"{type(self).__qualname__} names no env_module: a generated env sets it to the "
                                  "verifiers module it was imported from")
        self._handle = _handle(self.env_module, dict(self.env_args))
        self._task: Task | None = None
        self._done = False
        self._steps = 0
        self._episode_id: str | None = None

    def reset(self, seed: int | None = None, episode_id: str | None = None, task: Task | None = None,
              **kwargs: Any) -> VerifiersObservation:
        if kwargs:
            raise ValidationError(f"unknown reset option(s) {sorted(kwargs)}; pick a task with task_id=... or "
                                  "split=... (the Task API), or give only seed")
        if task is None:  # no task named: a train task (else the first split's), drawn by seed
            source = type(self).tasks
            if source is None:
                raise ValidationError(f"{type(self).__qualname__} declares no tasks")
            task = source.draw(seed)
        self._task = task
        self._done, self._steps = False, 0
        self._episode_id = episode_id or str(uuid.uuid4())
        return self._observe(reward=None)

    async def step_async(self, action: VerifiersAction, timeout_s: float | None = None,
                         **kwargs: Any) -> VerifiersObservation:
        if self._task is None:
            raise ExecutionError("No task yet: call reset() before step().")
        if self._done:
            raise ExecutionError("The task was already answered (one reply per episode): call reset().")
        if not isinstance(action, VerifiersAction):  # in-process callers may pass a dict
            action = VerifiersAction.model_validate(action)
        self._steps += 1
        try:
            scored = await self._handle.score(dict(self._task.data), action.completion)
        except Exception as exc:  # the rubric's own code (verifiers logs and zeroes a reward that raises)
            raise ExecutionError(f"the verifiers rubric's scoring failed: {type(exc).__name__}: {exc}") from None
        self._done = True
        return self._observe(reward=scored.reward, completion=action.completion, rewards=scored.rewards,
                             metrics=scored.metrics)

    def step(self, action: VerifiersAction, timeout_s: float | None = None, **kwargs: Any) -> VerifiersObservation:
        """In-process callers (``openenv validate``, tests): ``step_async`` run to completion."""
        return run_sync(self.step_async(action, timeout_s=timeout_s, **kwargs))  # type: ignore[no-any-return]

    @property
    def state(self) -> VerifiersState:
        return VerifiersState(episode_id=self._episode_id, step_count=self._steps,
                              task_id=self._task.id if self._task else None, done=self._done)

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(name=type(self).__name__, version="0.1.0",
                                   description=f"verifiers env {self.env_module} (load_environment), one reply "
                                               "per task")

    def _observe(self, *, reward: float | None, completion: str | None = None,
                 rewards: dict[str, float] | None = None, metrics: dict[str, float] | None = None,
                 ) -> VerifiersObservation:
        assert self._task is not None
        prompt = self._task.data.get("prompt")
        return VerifiersObservation(
            task_id=self._task.id, prompt=prompt, prompt_text=_text(prompt),
            system_prompt=_system(prompt) or getattr(self._handle.env, "system_prompt", None),
            completion=completion, rewards=rewards or {}, metrics=metrics or {}, reward=reward, done=self._done,
        )
