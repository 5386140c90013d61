"""The one composition core: how several scores become one (used by ``openenv_rubrics.compose``
and by the compatibility layer's containers in ``openenv.core.rubrics``).

Everything here works on plain values, never on a rubric class, so both rubric families share it:

* ``fold(items, score, step, start)`` scores ``items`` in order and folds each value into an
  accumulator with ``step(acc, index, value) -> (acc, stop)``. It stays synchronous until the first
  ``score`` that returns an awaitable, and from there returns a coroutine that awaits the rest in
  order — so one loop serves sync children, async children and a mix.
* Steps: ``weighted_sum(weights)`` (``Σ wᵢ·vᵢ``; ``weighted_total`` for values already scored)
  and ``fail_fast(fails)`` (stop at the first value ``fails(index, value)`` rejects; the
  accumulator is a ``Chain`` recording what ran and where it stopped).
* Scores: ``gate`` (a score kept, or replaced, on either side of a threshold) and the discounted
  trajectory sums ``discounted_return`` and ``discounted_credit``.

Semantics that differ between the two families are parameters here, not second copies: upstream's
``Sequential`` fails at a score of exactly 0 and scores 0, ours fails below a threshold and scores
``fail_score``; upstream's ``Gate`` keeps the passing score, our ``Threshold`` pays ``on_pass``.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

__all__ = ["Chain", "FoldStep", "discounted_credit", "discounted_return", "fail_fast", "fold", "gate",
           "weighted_sum", "weighted_total"]

A = TypeVar("A")
V = TypeVar("V")
I = TypeVar("I")  # noqa: E741 - the item type

#: ``step(acc, index, value) -> (new acc, stop now?)``
FoldStep = Callable[[A, int, V], tuple[A, bool]]


def fold(items: Sequence[I], score: Callable[[I], V | Awaitable[V]], step: FoldStep[A, V], start: A) -> A | Any:
    """Fold ``score(item)`` for each item in order into ``start`` through ``step``.

    Returns the accumulator, or — as soon as one ``score`` returns an awaitable — a coroutine that
    awaits it and scores the remaining items in order (never concurrently: deterministic)."""
    acc = start
    for index, item in enumerate(items):
        value = score(item)
        if inspect.isawaitable(value):
            return _fold_async(items, index, score, step, acc, value)
        acc, stop = step(acc, index, value)
        if stop:
            break
    return acc


async def _fold_async(items: Sequence[I], index: int, score: Callable[[I], V | Awaitable[V]],
                      step: FoldStep[A, V], acc: A, pending: Awaitable[V]) -> A:
    acc, stop = step(acc, index, await pending)
    for later in range(index + 1, len(items)):
        if stop:
            break
        value = score(items[later])
        if inspect.isawaitable(value):
            value = await value
        acc, stop = step(acc, later, value)  # type: ignore[arg-type]
    return acc


def weighted_total(weights: Iterable[float], values: Iterable[float]) -> float:
    """``Σ weights[i] * values[i]`` over values already scored: the ``weighted_sum`` fold without the
    per-item scoring (the same additions in the same order, so the same float)."""
    total = 0.0
    for w, v in zip(weights, values):  # noqa: B905 - one weight per value, checked by the callers
        total += w * v
    return total


def weighted_sum(weights: Sequence[float]) -> FoldStep[float, float]:
    """The step of ``Σ weights[i] * value_i`` (start at ``0.0``), scoring as it goes."""

    def step(acc: float, index: int, value: float) -> tuple[float, bool]:
        return acc + weights[index] * value, False

    return step


@dataclass
class Chain(Generic[V]):
    """A fail-fast fold's accumulator: the values scored so far, and the index that failed (or None)."""

    values: list[V] = field(default_factory=list)
    stopped_at: int | None = None

    def outcome(self, fail_score: float, empty_score: float, score_of: Callable[[V], float]) -> float:
        """``fail_score`` if the chain stopped, else the last value's score (``empty_score`` if none ran)."""
        if self.stopped_at is not None:
            return fail_score
        return score_of(self.values[-1]) if self.values else empty_score


def fail_fast(fails: Callable[[int, V], bool]) -> FoldStep[Chain[V], V]:
    """The step of a fail-fast chain (start at ``Chain()``): records each value, stops at the first
    one ``fails(index, value)`` rejects. Later items are never scored."""

    def step(acc: Chain[V], index: int, value: V) -> tuple[Chain[V], bool]:
        acc.values.append(value)
        if fails(index, value):
            acc.stopped_at = index
            return acc, True
        return acc, False

    return step


def gate(score: float, threshold: float, *, on_pass: float | None = None, on_fail: float = 0.0) -> float:
    """``score >= threshold``: ``on_pass`` (``None``: the score itself), else ``on_fail``."""
    if score >= threshold:
        return score if on_pass is None else on_pass
    return on_fail


def discounted_return(rewards: Sequence[float], gamma: float, *, normalize: bool = False) -> float:
    """``Σ gamma**t * r_t`` (divided by ``Σ gamma**t`` with ``normalize``); exact summation."""
    weights = [gamma**t for t in range(len(rewards))]
    total = math.fsum(w * r for w, r in zip(weights, rewards, strict=True))
    return total / math.fsum(weights) if normalize else total


def discounted_credit(score: float, gamma: float, steps: int) -> list[float]:
    """An episode score credited back to its ``steps`` steps: step ``t`` gets ``gamma**(steps-1-t) * score``."""
    return [score * gamma ** (steps - 1 - t) for t in range(steps)]
