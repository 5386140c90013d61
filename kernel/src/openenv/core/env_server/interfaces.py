"""``openenv.core.env_server.interfaces``: upstream's ``Environment`` and friends on the kernel.

``Environment`` here is a thin subclass of the kernel's ``openenv.env.Environment`` that adds what
upstream env code calls on ``self`` and keeps upstream's execution model:

* **Thread affinity by default.** Upstream runs every session of a sync env on its own
  single-thread executor (creation, reset, step, close on one thread). The kernel's default is a
  shared pool, which is faster but breaks envs that hold thread-bound handles; so this class sets
  ``THREAD_AFFINITY = True``. An env that is thread-agnostic may set it to ``False`` (or
  ``BLOCKING = False`` for cheap pure-Python steps) to use the faster kernel paths.
* **Upstream's constructor.** ``Environment(transform=None, rubric=None)`` stores both; the kernel's
  ``Environment`` takes no arguments (rewards and observation mapping are the env's own business
  there). Types come from ``step``'s annotations as in the kernel, so ``class MyEnv(Environment)``
  with ``def step(self, action: MyAction) -> MyObservation`` needs no generic parameters.
* **Half-async envs.** Upstream chose per method: an env overriding only ``step_async`` had its
  sync ``reset`` run on a worker thread. The kernel treats an env as async as a whole and would
  call the sync half on the event loop, blocking every session; so the missing async half is
  supplied here and runs the sync method in a worker thread.
* Helpers env code calls: ``_apply_transform``, ``_apply_rubric`` (+ async), ``_reset_rubric``
  (+ async), and the web hooks ``render_web`` / ``web_actions`` (no web UI uses them yet).

``Transform``, ``Message``, ``ModelTokenizer`` and ``TaskProvider`` are upstream's declarations.
Task-provider methods may be implemented, but no route serves them (the task API is not supported).
"""

from __future__ import annotations

import asyncio
import inspect
from abc import ABC, abstractmethod
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from typing_extensions import TypedDict

from openenv.env import Environment as _KernelEnvironment
from openenv.types import Action, EnvironmentMetadata, Observation, State

__all__ = ["Environment", "EnvironmentMetadata", "Message", "ModelTokenizer", "TaskProvider", "Transform"]

ActT = TypeVar("ActT", bound=Action)
ObsT = TypeVar("ObsT", bound=Observation)
StateT = TypeVar("StateT", bound=State)


class Message(TypedDict):
    """A chat message (Hugging Face chat-template format)."""

    role: str
    content: str


class ModelTokenizer(Protocol):
    """A tokenizer with chat templates (Hugging Face ``transformers`` compatible)."""

    def apply_chat_template(
        self, conversation: list[Message], tokenize: bool = True, return_tensors: str | None = None,
        **kwargs: Any,
    ) -> Any: ...

    def decode(self, token_ids: Any, skip_special_tokens: bool = False, **kwargs: Any) -> str: ...


class TaskProvider(Protocol):
    """Upstream's optional task-discovery methods (declared structurally on an env).

    Declaring them is harmless, but this OpenEnv serves no task routes (``/{env}/splits`` …).
    """

    def list_splits(self) -> list[Any]: ...

    def list_tasks(self, split: str) -> list[Any]: ...

    def num_tasks(self, split: str) -> int: ...

    def get_task(self, split: str, index: int) -> Any: ...

    def get_task_range(self, split: str, start: int | None = None, stop: int | None = None) -> list[Any]: ...


class Transform(ABC, Generic[ObsT]):
    """Maps an observation to an observation (adds rewards, metrics, …)."""

    @abstractmethod
    def __call__(self, observation: ObsT) -> ObsT:
        """Return the transformed observation."""


class Environment(_KernelEnvironment[ActT, ObsT, StateT]):
    """Upstream's ``Environment`` base: the kernel's, with upstream's defaults and helpers.

    Implement ``reset``, ``step`` and the ``state`` property (or ``reset_async`` / ``step_async``).
    """

    # Upstream gives every session its own single-thread executor; keep that guarantee.
    THREAD_AFFINITY: ClassVar[bool] = True
    #: Supply the missing half of a half-async env (tool envs decide their async-ness themselves).
    _complete_async_pair: ClassVar[bool] = True
    #: Upstream's constructor arguments: ``rubric`` computes rewards, ``transform`` maps observations.
    #: (Class defaults too: upstream envs often skip ``super().__init__()``.)
    transform: Any = None
    rubric: Any = None

    def __init__(self, transform: Any = None, rubric: Any = None) -> None:
        super().__init__()
        self.transform = transform
        self.rubric = rubric

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls._complete_async_pair:
            async_step = cls.step_async is not _KernelEnvironment.step_async
            async_reset = cls.reset_async is not _KernelEnvironment.reset_async
            if async_step and not async_reset:
                cls.reset_async = _reset_in_thread  # type: ignore[method-assign]
            elif async_reset and not async_step:
                cls.step_async = _step_in_thread  # type: ignore[method-assign]

    # -- helpers upstream env code calls ----------------------------------------------------------

    def _apply_transform(self, observation: ObsT) -> ObsT:
        """Apply ``self.transform`` if one is set."""
        transform = getattr(self, "transform", None)
        return transform(observation) if transform is not None else observation

    def _apply_rubric(self, action: ActT, observation: ObsT) -> float:
        """The reward of ``self.rubric`` for this step, or ``0.0`` without a rubric."""
        rubric = getattr(self, "rubric", None)
        if rubric is None:
            return 0.0
        return rubric(action, observation)  # type: ignore[no-any-return]

    async def _apply_rubric_async(self, action: ActT, observation: ObsT) -> float:
        """Async twin of ``_apply_rubric`` (awaits an async rubric)."""
        rubric = getattr(self, "rubric", None)
        if rubric is None:
            return 0.0
        result = rubric(action, observation)
        if inspect.isawaitable(result):
            result = await result
        return result  # type: ignore[no-any-return]

    def _reset_rubric(self) -> None:
        """Clear the rubric's per-episode state (call it from ``reset``)."""
        rubric = getattr(self, "rubric", None)
        if rubric is not None:
            rubric.reset()

    async def _reset_rubric_async(self) -> None:
        """Async twin of ``_reset_rubric`` (uses the rubric's ``reset_async`` when it has one)."""
        rubric = getattr(self, "rubric", None)
        if rubric is None:
            return
        reset_async = getattr(rubric, "reset_async", None)
        if reset_async is not None:
            result = reset_async()
            if inspect.isawaitable(result):
                await result
        else:
            rubric.reset()

    def render_web(self, observation: dict[str, Any]) -> str | None:
        """HTML for an observation in a web UI; ``None`` lists its fields."""
        return None

    def web_actions(self, observation: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """One-click ``(label, action)`` pairs for a web UI."""
        return []


async def _reset_in_thread(self: Any, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Any:
    """The async reset of an env that only made ``step`` async: its sync ``reset`` in a worker thread."""
    return await asyncio.to_thread(self.reset, seed=seed, episode_id=episode_id, **kwargs)


async def _step_in_thread(self: Any, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
    """The async step of an env that only made ``reset`` async: its sync ``step`` in a worker thread."""
    if timeout_s is not None:
        kwargs["timeout_s"] = timeout_s
    return await asyncio.to_thread(self.step, action, **kwargs)
