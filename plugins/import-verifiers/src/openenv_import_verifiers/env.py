"""The env class every generated package subclasses: one verifiers task per episode.

A generated package (``openenv import verifiers:<module>``) holds ``tasks.jsonl`` (each row's
``data`` is a verifiers ``TaskData`` as JSON) and a subclass of ``VerifiersEnv`` naming the taskset
module. Promises (tested in tests/verifiers/test_import_verifiers.py):

* ``reset(task=...)`` (the server resolves ``task_id`` / ``split``) rebuilds the verifiers task from
  its row and shows its prompt; ``reset()`` without a task takes a train task drawn by ``seed``;
* ``step({"completion": text})`` ends the episode: the task's own ``@vf.reward`` functions score the
  completion (as the trace's reply) and the reward is verifiers' total (each reward times its weight,
  summed); each named reward and ``@vf.metric`` value is in the observation (``rewards``,
  ``metrics``);
* stepping before ``reset`` or after the answer is an ``ExecutionError`` that says to reset; a reward
  function that raises is an ``ExecutionError`` naming it (the server keeps serving).

Single-turn only: verifiers 0.4 runs multi-turn work through harnesses and runtimes (agents in
sandboxes), not an env-response hook a server could call, so one completion is one episode.
"""

from __future__ import annotations

import uuid
from typing import Any, ClassVar

from pydantic import Field

from openenv.env import Environment
from openenv.errors import ExecutionError, ValidationError
from openenv.tasks import Task, TaskSource
from openenv.types import Action, EnvironmentMetadata, Observation, State
from openenv_import_verifiers._sync import run_sync
from openenv_import_verifiers.taskset import TasksetHandle

__all__ = ["OneReplyEnv", "VerifiersAction", "VerifiersEnv", "VerifiersObservation", "VerifiersState"]


class VerifiersAction(Action):
    """The agent's reply to the task's prompt (scored as the trace's final reply)."""

    completion: str = Field(description="The assistant's reply to the prompt", max_length=1_000_000)


class VerifiersObservation(Observation):
    """The task's prompt; after the reply, verifiers' named rewards and metrics."""

    task_id: str = Field(description="The task's id (tasks.jsonl)")
    prompt: str | list[dict[str, Any]] | None = Field(default=None, description="The task's prompt, as verifiers "
                                                      "holds it: text or chat messages")
    prompt_text: str = Field(default="", description="The prompt's text (messages joined)")
    system_prompt: str | None = Field(default=None, description="The task's system prompt, if any")
    completion: str | None = Field(default=None, description="The reply that was scored (after the step)")
    rewards: dict[str, float] = Field(default_factory=dict, description="Each @vf.reward's weighted value")
    metrics: dict[str, float] = Field(default_factory=dict, description="Each @vf.metric's value (not summed)")


class VerifiersState(State):
    task_id: str | None = Field(default=None, description="The episode's task")
    done: bool = Field(default=False, description="Whether the reply was scored")


class OneReplyEnv(Environment[VerifiersAction, VerifiersObservation, VerifiersState]):
    """One task per episode, answered by one reply: the episode loop both verifiers APIs share.

    Subclasses load their verifiers object in ``__init__`` (then call ``super().__init__()``), and
    give ``_begin`` (per-task set-up at reset), ``_score`` (the reply scored by verifiers' own
    rubric) and ``_observation`` (the prompt fields of an observation)."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    tasks: ClassVar[TaskSource | None] = None

    def __init__(self) -> None:
        super().__init__()
        self._task: Task | None = None
        self._done = False
        self._steps = 0
        self._episode_id: str | None = None

    def _begin(self, task: Task) -> None:
        """Per-task set-up when an episode starts (nothing by default)."""

    async def _score(self, completion: str) -> Any:
        """The reply's score: an object with ``reward``, ``rewards`` and ``metrics``."""
        raise NotImplementedError

    def _observation(self, task: Task) -> dict[str, Any]:
        """``prompt``, ``prompt_text`` and ``system_prompt`` of ``task``'s observations."""
        raise NotImplementedError

    def _describe(self) -> str:
        raise NotImplementedError

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
        self._begin(task)
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
        scored = await self._score(action.completion)
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
        return EnvironmentMetadata(name=type(self).__name__, version="0.1.0", description=self._describe())

    def _observe(self, *, reward: float | None, completion: str | None = None,
                 rewards: dict[str, float] | None = None, metrics: dict[str, float] | None = None,
                 ) -> VerifiersObservation:
        assert self._task is not None
        return VerifiersObservation(task_id=self._task.id, **self._observation(self._task), completion=completion,
                                    rewards=rewards or {}, metrics=metrics or {}, reward=reward, done=self._done)


class VerifiersEnv(OneReplyEnv):
    """Subclasses set ``taskset_module`` (an importable verifiers taskset module) and ``tasks``."""

    #: The verifiers taskset module (exports one ``Taskset`` subclass via ``__all__``).
    taskset_module: ClassVar[str] = ""

    def __init__(self) -> None:
        if not self.taskset_module:
            raise ValidationError(f"{type(self).__qualname__} names no taskset_module: a generated env sets it to "
                                  "the verifiers module it was imported from")
        self._handle = TasksetHandle.load(self.taskset_module)
        self._vf_task: Any = None
        super().__init__()

    def _begin(self, task: Task) -> None:
        self._vf_task = self._handle.task_from_json(task.data)

    async def _score(self, completion: str) -> Any:
        return await self._handle.score(self._vf_task, completion)

    def _observation(self, task: Task) -> dict[str, Any]:
        data = self._vf_task.data
        return {"prompt": task.data.get("prompt"), "prompt_text": data.prompt_text,
                "system_prompt": data.system_prompt}

    def _describe(self) -> str:
        return f"verifiers taskset {self.taskset_module}, one reply per task"
