"""Composition: build one reward from several rubrics.

Every composite takes ``rubrics``: a list whose items are ``Rubric`` objects, ``"NAME[=CONFIG]"``
strings, or mappings ``{"rubric": NAME, "config": {...}, "name": ALIAS, "weight": W}`` (built from
the registry with ``build_rubric``). Children's names must be unique inside a composite (set
``name`` to tell two of a kind apart); the composite's result lists each child's score as a
component, and a child's own components under ``child.component``.

A composite is async (``ascore``) when any child is, and scores single steps only when every
child does. Its declared range is derived from its children's, so a range violation is always
caught where it happens — in the child, which the error names.

The scores are combined by the kernel's composition core, ``openenv.rubric_compose`` (the same
functions the compatibility layer's containers use); this module adds children from specs,
components, ranges and faults around it.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias

from openenv.errors import ConfigError, RuleViolation
from openenv.rubric import Rubric, RubricResult, Step, components_of
from openenv.rubric_compose import (
    Chain,
    discounted_credit,
    discounted_return,
    fail_fast,
    fold,
    gate,
    weighted_sum,
    weighted_total,
)

# The lower-case names are the kernel's core, re-exported (one implementation).
__all__ = ["AllOf", "AnyOf", "Chain", "ChildSpec", "Composite", "Max", "Min", "Sequential", "Threshold",
           "WeightedSum", "discounted_credit", "discounted_return", "fail_fast", "fold", "gate",
           "weighted_sum", "weighted_total"]

ChildSpec: TypeAlias = "Rubric | str | Mapping[str, Any]"


def _resolve(owner: str, specs: Sequence[ChildSpec]) -> tuple[list[Rubric], list[dict[str, Any]]]:
    """Build the children of composite ``owner``; returns them and each item's extra keys (weight...)."""
    from openenv_rubrics.config import build_rubric, parse_spec

    if isinstance(specs, str | Mapping) or not isinstance(specs, Sequence) or not specs:
        raise ConfigError(f"rubric '{owner}': 'rubrics' must be a non-empty list of rubrics, "
                          "'NAME[=CONFIG]' strings or {\"rubric\": NAME, \"config\": {...}} objects.")
    children: list[Rubric] = []
    extras: list[dict[str, Any]] = []
    for item in specs:
        extra: dict[str, Any] = {}
        if isinstance(item, Rubric):
            child = item
        elif isinstance(item, str):
            child = build_rubric(*parse_spec(item))
        elif isinstance(item, Mapping):
            item = dict(item)
            if "rubric" not in item:
                raise ConfigError(f"rubric '{owner}': child {item!r} has no 'rubric' key naming a registered rubric.")
            config = dict(item.pop("config", None) or {})
            rname = item.pop("rubric")
            if "name" in item:
                config["name"] = item.pop("name")
            extra = item
            child = build_rubric(rname, config)
        else:
            raise ConfigError(f"rubric '{owner}': cannot use {item!r} as a child rubric.")
        children.append(child)
        extras.append(extra)
    seen: set[str] = set()
    for child in children:
        if child.name in seen:
            raise RuleViolation(f"rubric '{owner}': two children are named '{child.name}'; component names "
                                "must be unique. Give one a different name (name=... in its config).")
        seen.add(child.name)
    return children, extras


def _score_of(result: RubricResult) -> float:
    return result.score


class Composite(Rubric):
    """Base of composites: children scored in order, combined by ``combine``."""

    _abstract = True

    def __init__(self, rubrics: Sequence[ChildSpec], **base: Any) -> None:
        owner = base.get("name") or type(self).__name__
        self.children, self._extras = _resolve(owner, rubrics)
        self._init_composite(base)

    def _init_composite(self, base: dict[str, Any]) -> None:
        low, high = self._range()
        base.setdefault("low", low)
        base.setdefault("high", high)
        Rubric.__init__(self, **base)
        self.is_async = any(c.is_async for c in self.children)
        self.per_step = all(c.per_step for c in self.children)

    def _range(self) -> tuple[float, float]:
        raise NotImplementedError

    def combine(self, results: dict[str, RubricResult]) -> float | RubricResult:
        raise NotImplementedError

    def _result(self, score: float, results: dict[str, RubricResult]) -> RubricResult:
        components, rationales = components_of(results)
        return RubricResult(score, components, rationales=rationales)

    def reset(self) -> None:
        for child in self.children:
            child.reset()

    def keeps_episode_state(self) -> bool:
        return any(c.keeps_episode_state() for c in self.children)

    def for_session(self) -> Rubric:
        if not self.keeps_episode_state():
            return self
        clone = copy.copy(self)
        clone.children = [c.for_session() for c in self.children]
        return clone

    # sync
    def evaluate(self, action: Any, observation: Any) -> float | RubricResult:
        results: dict[str, RubricResult] = {}
        for child in self.children:
            results[child.name] = child.score(action, observation)
        return self.combine(results)

    def evaluate_episode(self, steps: Sequence[Step]) -> float | RubricResult:
        return self.combine({c.name: c.score_episode(steps) for c in self.children})

    def score(self, action: Any, observation: Any) -> RubricResult:
        if self.is_async:
            raise RuleViolation(f"rubric '{self.name}' has an async child: call `await rubric.ascore(...)`.")
        if not self.per_step:
            raise RuleViolation(f"rubric '{self.name}' has an episode-only child: call score_episode(steps).")
        return super().score(action, observation)

    def score_episode(self, steps: Sequence[Step]) -> RubricResult:
        if self.is_async:
            raise RuleViolation(f"rubric '{self.name}' has an async child: call `await rubric.ascore_episode(...)`.")
        return super().score_episode(steps)

    # async
    async def ascore(self, action: Any, observation: Any) -> RubricResult:
        if not self.per_step:
            raise RuleViolation(f"rubric '{self.name}' has an episode-only child: call ascore_episode(steps).")
        try:
            results = {c.name: await c.ascore(action, observation) for c in self.children}
            value = self.combine(results)
        except RuleViolation:
            raise
        except Exception as exc:
            return self._fault(exc)
        return self._check(value)

    async def ascore_episode(self, steps: Sequence[Step]) -> RubricResult:
        try:
            value = self.combine({c.name: await c.ascore_episode(steps) for c in self.children})
        except RuleViolation:
            raise
        except Exception as exc:
            return self._fault(exc)
        return self._check(value)

    def describe(self) -> dict[str, Any]:
        doc = super().describe()
        doc["children"] = [c.describe() for c in self.children]
        return doc


class WeightedSum(Composite):
    """``sum(weight_i * score_i)``; weights from ``weights`` or each child item's ``"weight"``."""

    def __init__(self, rubrics: Sequence[ChildSpec], weights: Sequence[float] | None = None, **base: Any) -> None:
        owner = base.get("name") or "weighted_sum"
        self.children, self._extras = _resolve(owner, rubrics)
        item_weights = [e.pop("weight", None) for e in self._extras]
        if weights is None:
            if any(w is None for w in item_weights):
                raise ConfigError(f"rubric '{owner}': give weights=[...] or a 'weight' for every child.")
            weights = [float(w) for w in item_weights]  # type: ignore[arg-type]
        elif any(w is not None for w in item_weights):
            raise ConfigError(f"rubric '{owner}': give weights either in weights=[...] or per child, not both.")
        if len(weights) != len(self.children) or not all(math.isfinite(w) for w in weights):
            raise ConfigError(f"rubric '{owner}': need one finite weight per child ({len(self.children)}), "
                              f"got {list(weights)}.")
        self.weights = [float(w) for w in weights]
        self._init_composite(base)

    def _range(self) -> tuple[float, float]:
        lo = sum(min(w * c.low, w * c.high) for w, c in zip(self.weights, self.children, strict=True))
        hi = sum(max(w * c.low, w * c.high) for w, c in zip(self.weights, self.children, strict=True))
        return (lo, hi) if lo < hi else (lo, lo + 1.0)

    def combine(self, results: dict[str, RubricResult]) -> RubricResult:
        total = weighted_total(self.weights, [r.score for r in results.values()])
        return self._result(total, results)


class _Gate(Composite):
    """Pass/fail composites: a child passes when its score >= ``threshold`` (default: its ``high``)."""

    _abstract = True

    def __init__(self, rubrics: Sequence[ChildSpec], threshold: float | None = None,
                 on_pass: float = 1.0, on_fail: float = 0.0, **base: Any) -> None:
        if on_pass == on_fail:
            raise ConfigError("on_pass and on_fail must differ.")
        self.threshold, self.on_pass, self.on_fail = threshold, float(on_pass), float(on_fail)
        super().__init__(rubrics, **base)

    def passes(self, child: Rubric, result: RubricResult) -> bool:
        return gate(result.score, child.high if self.threshold is None else self.threshold,
                    on_pass=1.0, on_fail=0.0) == 1.0

    def _range(self) -> tuple[float, float]:
        return min(self.on_pass, self.on_fail), max(self.on_pass, self.on_fail)


class AllOf(_Gate):
    """``on_pass`` (1.0) when every child passes, else ``on_fail`` (0.0)."""

    def combine(self, results: dict[str, RubricResult]) -> RubricResult:
        ok = all(self.passes(c, results[c.name]) for c in self.children)
        return self._result(self.on_pass if ok else self.on_fail, results)


class AnyOf(_Gate):
    """``on_pass`` (1.0) when at least one child passes, else ``on_fail`` (0.0)."""

    def combine(self, results: dict[str, RubricResult]) -> RubricResult:
        ok = any(self.passes(c, results[c.name]) for c in self.children)
        return self._result(self.on_pass if ok else self.on_fail, results)


class Threshold(_Gate):
    """One child binarised: ``on_pass`` when its score >= ``threshold``, else ``on_fail``."""

    def __init__(self, rubric: ChildSpec, threshold: float, on_pass: float = 1.0, on_fail: float = 0.0,
                 **base: Any) -> None:
        super().__init__([rubric], threshold=threshold, on_pass=on_pass, on_fail=on_fail, **base)

    def combine(self, results: dict[str, RubricResult]) -> RubricResult:
        child = self.children[0]
        assert self.threshold is not None  # required by Threshold's signature
        return self._result(gate(results[child.name].score, self.threshold, on_pass=self.on_pass,
                                 on_fail=self.on_fail), results)


class Sequential(Composite):
    """Fail-fast chain: every child but the last is a gate, scored in order; the first that fails
    (score < ``threshold``, default its ``high``) stops the chain with ``fail_score`` (default:
    the last child's ``low``) and the later children are not run. If all pass, the score is the
    last child's. Put cheap checks (format) before expensive ones (an LLM judge)."""

    def __init__(self, rubrics: Sequence[ChildSpec], threshold: float | None = None,
                 fail_score: float | None = None, **base: Any) -> None:
        owner = base.get("name") or "sequential"
        self.children, self._extras = _resolve(owner, rubrics)
        self.threshold = threshold
        self.fail_score = self.children[-1].low if fail_score is None else float(fail_score)
        self._init_composite(base)

    def _range(self) -> tuple[float, float]:
        last = self.children[-1]
        return min(self.fail_score, last.low), max(self.fail_score, last.high)

    def _failed(self, child: Rubric, result: RubricResult) -> bool:
        return result.score < (child.high if self.threshold is None else self.threshold)

    def _fails(self, index: int, result: RubricResult) -> bool:
        """Every child but the last is a gate."""
        return index < len(self.children) - 1 and self._failed(self.children[index], result)

    def _finish(self, chain: Chain[RubricResult]) -> RubricResult:
        results = {c.name: r for c, r in zip(self.children, chain.values)}  # noqa: B905 - a prefix, by design
        res = self._result(chain.outcome(self.fail_score, self.fail_score, _score_of), results)
        if chain.stopped_at is not None:
            res.rationale = f"stopped at '{self.children[chain.stopped_at].name}': below its pass threshold"
        return res

    def _run(self, score_child: Any) -> RubricResult:
        chain = fold(self.children, score_child, fail_fast(self._fails), Chain[RubricResult]())
        return self._finish(chain)

    async def _arun(self, score_child: Any) -> RubricResult:
        chain = fold(self.children, score_child, fail_fast(self._fails), Chain[RubricResult]())
        if not isinstance(chain, Chain):  # an async child: the fold is a coroutine from there on
            chain = await chain
        return self._finish(chain)

    def evaluate(self, action: Any, observation: Any) -> RubricResult:
        return self._run(lambda c: c.score(action, observation))

    def evaluate_episode(self, steps: Sequence[Step]) -> RubricResult:
        return self._run(lambda c: c.score_episode(steps))

    async def ascore(self, action: Any, observation: Any) -> RubricResult:
        if not self.per_step:
            raise RuleViolation(f"rubric '{self.name}' has an episode-only child: call ascore_episode(steps).")
        try:
            value = await self._arun(lambda c: c.ascore(action, observation))
        except RuleViolation:
            raise
        except Exception as exc:
            return self._fault(exc)
        return self._check(value)

    async def ascore_episode(self, steps: Sequence[Step]) -> RubricResult:
        try:
            value = await self._arun(lambda c: c.ascore_episode(steps))
        except RuleViolation:
            raise
        except Exception as exc:
            return self._fault(exc)
        return self._check(value)


class Max(Composite):
    """The highest child score."""

    def _range(self) -> tuple[float, float]:
        lo, hi = max(c.low for c in self.children), max(c.high for c in self.children)
        return (lo, hi) if lo < hi else (lo, lo + 1.0)

    def combine(self, results: dict[str, RubricResult]) -> RubricResult:
        return self._result(max(r.score for r in results.values()), results)


class Min(Composite):
    """The lowest child score."""

    def _range(self) -> tuple[float, float]:
        lo, hi = min(c.low for c in self.children), min(c.high for c in self.children)
        return (lo, hi) if lo < hi else (lo, lo + 1.0)

    def combine(self, results: dict[str, RubricResult]) -> RubricResult:
        return self._result(min(r.score for r in results.values()), results)

