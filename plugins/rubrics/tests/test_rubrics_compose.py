"""Composition: weighted sum, gates, threshold, fail-fast chains, max/min, discounted return."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from openenv.errors import ConfigError, RuleViolation
from openenv.rubric import AsyncRubric, Rubric, RubricError, RubricResult, Step
from openenv_rubrics.builtin import ExactMatch, LengthPenalty, RegexMatch
from openenv_rubrics.compose import AllOf, AnyOf, Max, Min, Sequential, Threshold, WeightedSum
from openenv_rubrics.trajectory import DiscountedReturn


class Fixed(Rubric):
    """Scores the number it is given as the action (or a constant)."""

    def __init__(self, value: float | None = None, calls: list[str] | None = None, **base: Any) -> None:
        super().__init__(**base)
        self.value, self.calls = value, calls

    def evaluate(self, action: Any, observation: Any) -> Any:
        if self.calls is not None:
            self.calls.append(self.name)
        return self.value if self.value is not None else action


class Judged(AsyncRubric):
    def __init__(self, value: float, **base: Any) -> None:
        super().__init__(**base)
        self.value = value

    async def aevaluate(self, action: Any, observation: Any) -> RubricResult:
        await asyncio.sleep(0)
        return RubricResult(self.value, rationale="looks right")


class Steps(Rubric):
    high = 100.0

    def evaluate_episode(self, steps: Any) -> float:
        return float(len(steps))


def test_weighted_sum_scores_ranges_and_components() -> None:
    total = WeightedSum([Fixed(1.0, name="a"), LengthPenalty(max_length=2, limit=4, name="len")], weights=[0.8, 0.5])
    assert (total.low, total.high) == (-0.5, 0.8)
    result = total.score("abc", None)
    assert result.score == pytest.approx(0.8 - 0.25)
    assert result.components == {"a": 1.0, "len": -0.5, "len.length": 3.0}
    negative = WeightedSum([Fixed(0.5, name="a")], weights=[-2.0])
    assert (negative.low, negative.high) == (-2.0, 0.0) and negative.score(None, None).score == -1.0


def test_weighted_sum_from_config_items() -> None:
    total = WeightedSum([
        {"rubric": "exact_match", "config": {"expected": "4"}, "weight": 0.7},
        {"rubric": "regex", "config": {"pattern": r"\d"}, "weight": 0.3, "name": "digit"},
    ])
    assert total.score("4", None).score == pytest.approx(1.0)
    assert total.score("5", None).to_json() == {"score": pytest.approx(0.3),
                                                 "components": {"exact_match": 0.0, "digit": 1.0}}
    with pytest.raises(ConfigError, match="a 'weight' for every child"):
        WeightedSum([{"rubric": "exact_match", "config": {"expected": "4"}}])
    with pytest.raises(ConfigError, match="not both"):
        WeightedSum([{"rubric": "exact_match", "config": {"expected": "4"}, "weight": 1}], weights=[1])
    with pytest.raises(ConfigError, match="one finite weight per child"):
        WeightedSum([Fixed(1.0)], weights=[1.0, 2.0])
    with pytest.raises(ConfigError, match="non-empty list"):
        WeightedSum([], weights=[])


def test_children_need_unique_names() -> None:
    with pytest.raises(RuleViolation, match="two children are named 'exact_match'"):
        Max([ExactMatch(expected="a"), ExactMatch(expected="b")])
    ok = Max([ExactMatch(expected="a"), ExactMatch(expected="b", name="b")])
    assert ok.score("b", None).components == {"exact_match": 0.0, "b": 1.0}


def test_all_of_and_any_of_gates() -> None:
    checks = [RegexMatch(pattern=r"\d+", name="digits"), RegexMatch(pattern=r"\d{3}", name="three")]
    assert AllOf(checks).score("123", None).score == 1.0
    assert AllOf(checks).score("12", None).score == 0.0
    assert AnyOf(checks).score("12", None).score == 1.0
    assert AnyOf(checks).score("ab", None).score == 0.0
    partial = [Fixed(name="x"), Fixed(0.9, name="y")]
    assert AllOf(partial, threshold=0.5).score(0.6, None).score == 1.0
    assert AllOf(partial).score(1.0, None).score == 0.0  # default threshold: the child's high
    custom = AnyOf(partial, on_pass=2.0, on_fail=-1.0)
    assert (custom.low, custom.high) == (-1.0, 2.0) and custom.score(0.0, None).score == -1.0


def test_threshold_binarises_one_child() -> None:
    gate = Threshold(Fixed(name="p"), threshold=0.7)
    assert gate.score(0.7, None).score == 1.0 and gate.score(0.69, None).score == 0.0
    assert gate.score(0.8, None).components == {"p": 0.8}
    assert Threshold("exact_match={\"expected\": \"y\"}", threshold=1.0).score("y", None).score == 1.0


def test_sequential_fails_fast() -> None:
    calls: list[str] = []
    chain = Sequential([Fixed(calls=calls, name="format"), Fixed(0.4, calls=calls, name="judge")])
    result = chain.score(0.0, None)
    assert result.score == 0.0 and calls == ["format"] and result.components == {"format": 0.0}
    assert result.rationale == "stopped at 'format': below its pass threshold"
    calls.clear()
    result = chain.score(1.0, None)
    assert result.score == 0.4 and calls == ["format", "judge"]
    strict = Sequential([Fixed(name="a"), Fixed(0.3, name="b")], threshold=0.5, fail_score=-1.0)
    assert strict.score(0.4, None).score == -1.0


def test_max_and_min() -> None:
    parts = [Fixed(0.2, name="a"), Fixed(0.9, name="b"), Fixed(name="c", low=-1.0)]
    assert Max(parts).score(0.5, None).score == 0.9
    assert Min(parts).score(0.5, None).score == 0.2
    assert Min(parts).score(-0.5, None).score == -0.5
    assert (Min(parts).low, Min(parts).high) == (-1.0, 1.0)


def test_a_faulty_child_is_named_and_the_composite_fallback_applies() -> None:
    total = WeightedSum([Fixed(name="good"), Fixed(name="bad")], weights=[0.5, 0.5])
    with pytest.raises(RubricError, match=r"rubric 'good': score 3\.0 is outside") as err:
        total.score(3.0, None)
    assert err.value.rubric == "good"
    safe = WeightedSum([Fixed(0.5, name="good"), Fixed(name="bad", on_error="fallback", fallback_score=0.0)],
                       weights=[0.5, 0.5])
    result = safe.score("not a number", None)
    assert result.score == 0.25 and "bad" in result.rationales and "fallback" in result.rationales["bad"]
    outer = Max([Fixed(name="x")], on_error="fallback", fallback_score=0.0)
    assert outer.score(5.0, None).error == "rubric 'x': score 5.0 is outside its declared range [0.0, 1.0]."


async def test_async_children_make_the_composite_async() -> None:
    mixed = WeightedSum([Judged(0.5, name="judge"), ExactMatch(expected="4")], weights=[0.5, 0.5])
    assert mixed.is_async
    with pytest.raises(RuleViolation, match="async child"):
        mixed.score("4", None)
    result = await mixed.ascore("4", None)
    assert result.score == 0.75 and result.rationales == {"judge": "looks right"}
    chain = Sequential([ExactMatch(expected="4"), Judged(0.8, name="judge")])
    assert (await chain.ascore("4", None)).score == 0.8
    assert (await chain.ascore("5", None)).components == {"exact_match": 0.0}
    # nested composites flatten with dotted names
    nested = Max([mixed, Fixed(0.1, name="floor")], name="best")
    assert (await nested.ascore("4", None)).components == {
        "weighted_sum": 0.75, "weighted_sum.judge": 0.5, "weighted_sum.exact_match": 1.0, "floor": 0.1}


def test_reset_reaches_every_child() -> None:
    class Count(Rubric):
        high = 10.0

        def __init__(self) -> None:
            super().__init__()
            self.n = 0

        def evaluate(self, action: Any, observation: Any) -> float:
            self.n += 1
            return float(self.n)

        def reset(self) -> None:
            self.n = 0

    total = Max([Count()])
    total.score(None, None)
    total.score(None, None)
    total.reset()
    assert total.score(None, None).score == 1.0


def test_episode_scoring_through_composites() -> None:
    steps = [Step(0.2, None), Step(1.0, None)]
    total = WeightedSum([Fixed(name="last"), Steps()], weights=[1.0, 0.01])
    assert total.per_step is False
    assert total.score_episode(steps).score == pytest.approx(1.02)
    with pytest.raises(RuleViolation, match="episode-only child"):
        total.score(1.0, None)


def test_discounted_return() -> None:
    steps = [Step(None, None, 1.0), Step(None, None, 0.0), Step(None, None, 1.0)]
    plain = DiscountedReturn(gamma=0.5)
    assert (plain.low, plain.high) == (0.0, 2.0) and plain.per_step is False
    result = plain.score_episode(steps)
    assert result.score == 1.25 and result.components == {"steps": 3.0, "undiscounted": 2.0}
    assert DiscountedReturn(gamma=0.5, normalize=True).score_episode(steps).score == pytest.approx(1.25 / 1.75)
    assert DiscountedReturn(gamma=1.0).high == math.inf
    assert DiscountedReturn(gamma=1.0, horizon=4).high == 4.0
    with pytest.raises(RubricError, match="more than horizon=2"):
        DiscountedReturn(gamma=1.0, horizon=2).score_episode(steps)
    scored = DiscountedReturn(Fixed(name="r", low=-1.0), gamma=0.9)
    assert scored.low == pytest.approx(-10.0)
    assert scored.score_episode([Step(0.5, None), Step(0.5, None)]).score == pytest.approx(0.95)
    with pytest.raises(RubricError, match="step 1 has reward None"):
        plain.score_episode([Step(None, None, 1.0), Step(None, None, None)])
    with pytest.raises(RuleViolation, match="whole episodes only"):
        plain.score(None, None)
    with pytest.raises(ConfigError, match="gamma must be in"):
        DiscountedReturn(gamma=0.0)


async def test_discounted_return_over_an_async_rubric() -> None:
    rubric = DiscountedReturn(Judged(0.5, name="judge"), gamma=0.5)
    assert rubric.is_async
    assert (await rubric.ascore_episode([Step(1, 1), Step(2, 2)])).score == pytest.approx(0.75)
    with pytest.raises(RuleViolation, match="ascore_episode"):
        DiscountedReturn(Judged(0.5), on_error="fallback", fallback_score=0.0).score_episode([Step(1, 1)])
