"""``openenv.core.rubrics.base``: upstream's ``Rubric`` API as a thin adapter over ``openenv.rubric``.

``Rubric`` subclasses the kernel's ``openenv.rubric.Rubric`` (the one rubric contract), so an
upstream rubric is a kernel rubric: a server can apply it (``openenv serve``, an env's ``rubric``
declaration) and ``score``/``ascore`` return a range-checked ``RubricResult``. Its range is
unbounded (upstream declares none). As upstream (modelled on ``torch.nn.Module``):

* implement ``forward(action, observation) -> float`` (or ``async def forward``); call the rubric
  as ``rubric(action, observation)``; the score is kept in ``last_score``;
* rubrics assigned as attributes become children (``children()``, ``named_rubrics()``,
  ``get_rubric("a.b")``);
* hooks: ``register_forward_pre_hook(hook(rubric, action, obs))`` and
  ``register_forward_hook(hook(rubric, action, obs, score))``;
* an async ``forward`` — or a sync ``forward`` that returns an awaitable, e.g. a container with an
  async child — makes the call return a coroutine that runs the remaining hooks when awaited.

The kernel's ``evaluate`` is ``__call__`` (pre-hooks → ``forward`` → post-hooks); ``ascore`` awaits
it when the call returns a coroutine.
"""

from __future__ import annotations

import inspect
import math
from abc import ABCMeta, abstractmethod
from collections.abc import Callable, Iterator
from typing import Any

from openenv.rubric import OnError, RubricResult, _default_name
from openenv.rubric import Rubric as _KernelRubric

__all__ = ["Rubric"]


class Rubric(_KernelRubric, metaclass=ABCMeta):
    """Base of reward functions: implement ``forward``; call the instance."""

    _rubric_children: dict[str, Rubric]
    _forward_hooks: list[Callable[..., Any]]
    _forward_pre_hooks: list[Callable[..., Any]]
    last_score: float | None
    #: Upstream rubrics declare no range: any finite-or-not number passes the kernel's check.
    low: float = -math.inf
    high: float = math.inf
    on_error: OnError = "raise"
    fallback_score: float | None = None

    def __init__(self) -> None:
        object.__setattr__(self, "_rubric_children", {})
        object.__setattr__(self, "_forward_hooks", [])
        object.__setattr__(self, "_forward_pre_hooks", [])
        object.__setattr__(self, "last_score", None)
        if "name" not in self.__dict__:
            object.__setattr__(self, "name", type(self).name or _default_name(type(self)))

    # -- the kernel contract --------------------------------------------------------------------

    @property
    def is_async(self) -> bool:  # type: ignore[override]
        """True when ``forward`` (or a descendant's) is a coroutine function: use ``ascore``."""
        return inspect.iscoroutinefunction(self.forward) or any(
            inspect.iscoroutinefunction(r.forward) for r in self.rubrics())

    def evaluate(self, action: Any, observation: Any) -> Any:
        """The kernel's per-step method: pre-hooks → ``forward`` → post-hooks (``__call__``)."""
        return self(action, observation)

    async def ascore(self, action: Any, observation: Any) -> RubricResult:
        """Score one step, awaiting ``forward`` when it is async; range-checked like ``score``."""
        try:
            value = self(action, observation)
            if inspect.isawaitable(value):
                value = await value
        except Exception as exc:
            return self._fault(exc)
        return self._check(value)

    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, Rubric):
            self._children_dict()[name] = value
        object.__setattr__(self, name, value)

    def _children_dict(self) -> dict[str, Rubric]:
        # A subclass that forgot super().__init__() still works (upstream would fail on first use).
        children = self.__dict__.get("_rubric_children")
        if children is None:
            Rubric.__init__(self)
            children = self.__dict__["_rubric_children"]
        return children  # type: ignore[no-any-return]

    @abstractmethod
    def forward(self, action: Any, observation: Any) -> float:
        """The reward for ``observation`` produced by ``action``."""

    def __call__(self, action: Any, observation: Any) -> Any:
        """Run pre-hooks, ``forward``, post-hooks; return the score (or a coroutine of it)."""
        self._children_dict()
        if inspect.iscoroutinefunction(self.forward) or any(
                inspect.iscoroutinefunction(h) for h in self._forward_pre_hooks):
            # An async pre-hook must be awaited before forward runs: the whole call becomes async.
            return self._call_async(action, observation)
        self._run_pre_hooks(action, observation)
        result = self.forward(action, observation)
        if inspect.isawaitable(result):
            return self._finish_async(action, observation, result)
        return self._finish(action, observation, result)

    def _run_pre_hooks(self, action: Any, observation: Any) -> None:
        for hook in self._forward_pre_hooks:
            hook(self, action, observation)

    def _finish(self, action: Any, observation: Any, score: Any) -> Any:
        self.last_score = score
        for hook in self._forward_hooks:
            hook(self, action, observation, score)
        return score

    async def _call_async(self, action: Any, observation: Any) -> Any:
        for hook in self._forward_pre_hooks:
            result = hook(self, action, observation)
            if inspect.isawaitable(result):
                await result
        score = self.forward(action, observation)
        if not inspect.isawaitable(score):
            return self._finish(action, observation, score)
        return await self._finish_async(action, observation, score)

    async def _finish_async(self, action: Any, observation: Any, pending: Any) -> Any:
        score = await pending
        self.last_score = score
        for hook in self._forward_hooks:
            result = hook(self, action, observation, score)
            if inspect.isawaitable(result):
                await result
        return score

    # -- hooks and children ---------------------------------------------------------------------

    def register_forward_hook(self, hook: Callable[[Rubric, Any, Any, float], Any]) -> None:
        """Call ``hook(rubric, action, observation, score)`` after every ``forward``."""
        self._children_dict()
        self._forward_hooks.append(hook)

    def register_forward_pre_hook(self, hook: Callable[[Rubric, Any, Any], Any]) -> None:
        """Call ``hook(rubric, action, observation)`` before every ``forward``."""
        self._children_dict()
        self._forward_pre_hooks.append(hook)

    def children(self) -> Iterator[Rubric]:
        yield from self._children_dict().values()

    def named_children(self) -> Iterator[tuple[str, Rubric]]:
        yield from self._children_dict().items()

    def rubrics(self) -> Iterator[Rubric]:
        """Every descendant, depth first."""
        for child in self._children_dict().values():
            yield child
            yield from child.rubrics()

    def named_rubrics(self, prefix: str = "") -> Iterator[tuple[str, Rubric]]:
        """Every descendant with its dotted path."""
        for name, child in self._children_dict().items():
            path = f"{prefix}.{name}" if prefix else name
            yield path, child
            yield from child.named_rubrics(path)

    def get_rubric(self, path: str) -> Rubric:
        """The descendant at dotted ``path``; ``KeyError`` naming the path if there is none."""
        current: Rubric = self
        for part in path.split("."):
            children = current._children_dict()
            if part not in children:
                raise KeyError(f"Rubric path not found: {path} (children of this level: "
                               f"{', '.join(children) or 'none'})")
            current = children[part]
        return current

    def reset(self) -> None:
        """Forget per-episode state (called from the env's ``reset``)."""

    def keeps_episode_state(self) -> bool:
        """Whether this rubric or a descendant overrides ``reset`` (a served one is then copied for
        each session, as upstream gives each env instance its own rubric)."""
        return type(self).reset is not Rubric.reset or any(r.keeps_episode_state() for r in self.children())

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore what ``state_dict`` returned."""
