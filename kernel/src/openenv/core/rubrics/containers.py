"""``openenv.core.rubrics.containers``: upstream's rubric compositions.

``Sequential`` (fail fast on a zero), ``Gate`` (zero below a threshold), ``WeightedSum`` (weights
summing to 1), ``RubricList`` and ``RubricDict`` (named collections the parent's ``forward``
indexes). A container whose child is async returns a coroutine: ``Sequential`` awaits its children
in order (it stops at the first zero), ``WeightedSum`` awaits its async children concurrently, as
upstream. Inside a running event loop a ``Sequential`` of sync children returns a coroutine too
(upstream's rule, so ``await seq(a, o)`` works either way); async pre-hooks make any call async. These are thin
adapters: the scores are combined by the kernel's one composition core, ``openenv.rubric_compose``.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from openenv.core.rubrics.base import Rubric
from openenv.rubric_compose import Chain, fail_fast, fold, gate, weighted_sum

__all__ = ["Gate", "RubricDict", "RubricList", "Sequential", "WeightedSum"]


def _zero_fails(_index: int, score: float) -> bool:
    return score == 0.0


def _chain_score(chain: Chain[float]) -> float:
    """Upstream's fail-fast outcome: 0 at the first zero, else the last score (1.0 with no children)."""
    return chain.outcome(0.0, 1.0, float)


class Sequential(Rubric):
    """Children in order; the first zero stops and scores 0, else the last child's score."""

    def __init__(self, *rubrics: Rubric) -> None:
        super().__init__()
        for i, rubric in enumerate(rubrics):
            setattr(self, f"rubric_{i}", rubric)
        self._rubric_list = list(rubrics)

    def forward(self, action: Any, observation: Any) -> Any:
        chain = fold(self._rubric_list, lambda r: r(action, observation), fail_fast(_zero_fails), Chain[float]())
        if isinstance(chain, Chain):
            score = _chain_score(chain)
            if score != 0.0 and _in_event_loop():
                return _ready(score)  # upstream: awaitable inside a running loop
            return score
        return _then(chain, _chain_score)

    def __len__(self) -> int:
        return len(self._rubric_list)

    def __getitem__(self, index: int) -> Rubric:
        return self._rubric_list[index]


async def _then(pending: Any, finish: Any) -> Any:
    return finish(await pending)


async def _ready(score: float) -> float:
    return score


def _in_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


class Gate(Rubric):
    """The child's score if it reaches ``threshold``, else 0."""

    def __init__(self, rubric: Rubric, threshold: float = 1.0) -> None:
        super().__init__()
        self.rubric = rubric
        self.threshold = threshold

    def forward(self, action: Any, observation: Any) -> Any:
        score = self.rubric(action, observation)
        if inspect.isawaitable(score):
            return _then(score, lambda s: gate(s, self.threshold))
        return gate(score, self.threshold)


class WeightedSum(Rubric):
    """Σ weightᵢ × scoreᵢ; the weights must sum to 1 and match the rubrics one to one."""

    def __init__(self, rubrics: list[Rubric], weights: list[float]) -> None:
        super().__init__()
        if len(rubrics) != len(weights):
            raise ValueError(f"Number of rubrics ({len(rubrics)}) must match number of weights ({len(weights)})")
        if abs(sum(weights) - 1.0) > 1e-6:
            raise ValueError(f"Weights must sum to 1.0, got {sum(weights)}")
        for i, rubric in enumerate(rubrics):
            setattr(self, f"rubric_{i}", rubric)
        self._rubric_list = list(rubrics)
        self._weights = list(weights)

    def forward(self, action: Any, observation: Any) -> Any:
        # Every child is called first, so async children run concurrently when awaited (upstream).
        scores = [r(action, observation) for r in self._rubric_list]
        if any(inspect.isawaitable(s) for s in scores):
            return self._combine_async(scores)
        return self._combine(scores)

    def _combine(self, scores: list[float]) -> float:
        return fold(scores, lambda s: s, weighted_sum(self._weights), 0.0)  # type: ignore[no-any-return]

    async def _combine_async(self, scores: list[Any]) -> float:
        pending = [i for i, s in enumerate(scores) if inspect.isawaitable(s)]
        for i, value in zip(pending, await asyncio.gather(*(scores[i] for i in pending)), strict=True):
            scores[i] = value
        return self._combine(scores)

    @property
    def weights(self) -> list[float]:
        return list(self._weights)


class RubricList(Rubric):
    """An indexable list of child rubrics; its parent's ``forward`` decides which to call."""

    def __init__(self, rubrics: Iterable[Rubric] | None = None) -> None:
        super().__init__()
        self._rubrics: list[Rubric] = []
        for rubric in rubrics or ():
            self.append(rubric)

    def forward(self, action: Any, observation: Any) -> float:
        raise NotImplementedError("RubricList is a container: index it (rubrics[i](action, obs)) in the "
                                  "parent rubric's forward.")

    def append(self, rubric: Rubric) -> None:
        setattr(self, str(len(self._rubrics)), rubric)
        self._rubrics.append(rubric)

    def extend(self, rubrics: Iterable[Rubric]) -> None:
        for rubric in rubrics:
            self.append(rubric)

    def __len__(self) -> int:
        return len(self._rubrics)

    def __getitem__(self, index: int) -> Rubric:
        return self._rubrics[index]

    def __iter__(self) -> Iterator[Rubric]:
        return iter(self._rubrics)


class RubricDict(Rubric):
    """Child rubrics by key (e.g. one per game); its parent's ``forward`` picks one."""

    def __init__(self, rubrics: Mapping[str, Rubric] | None = None) -> None:
        super().__init__()
        self._rubric_dict: dict[str, Rubric] = {}
        if rubrics:
            self.update(rubrics)

    def forward(self, action: Any, observation: Any) -> float:
        raise NotImplementedError("RubricDict is a container: look a rubric up (rubrics[key](action, obs)) "
                                  "in the parent rubric's forward.")

    def __setitem__(self, key: str, rubric: Rubric) -> None:
        setattr(self, key, rubric)
        self._rubric_dict[key] = rubric

    def __getitem__(self, key: str) -> Rubric:
        return self._rubric_dict[key]

    def __contains__(self, key: object) -> bool:
        return key in self._rubric_dict

    def __len__(self) -> int:
        return len(self._rubric_dict)

    def __iter__(self) -> Iterator[str]:
        return iter(self._rubric_dict)

    def keys(self) -> Iterator[str]:
        return iter(self._rubric_dict.keys())

    def values(self) -> Iterator[Rubric]:
        return iter(self._rubric_dict.values())

    def items(self) -> Iterator[tuple[str, Rubric]]:
        return iter(self._rubric_dict.items())

    def update(self, rubrics: Mapping[str, Rubric]) -> None:
        for key, rubric in rubrics.items():
            self[key] = rubric
