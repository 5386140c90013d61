"""The kernel rubric contract (``openenv.rubric``): ranges, faults, fallbacks, async, episodes."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from openenv.errors import ConfigError, RuleViolation
from openenv.rubric import AsyncRubric, Rubric, RubricError, RubricResult, Step, components_of


class Const(Rubric):
    def __init__(self, value: Any, **base: Any) -> None:
        super().__init__(**base)
        self.value = value

    def evaluate(self, action: Any, observation: Any) -> Any:
        return self.value


class Boom(Rubric):
    def evaluate(self, action: Any, observation: Any) -> float:
        raise KeyError("missing")


class Counter(Rubric):
    """Per-episode state: the n-th step of an episode scores n / 10."""

    high = 10.0

    def __init__(self, **base: Any) -> None:
        super().__init__(**base)
        self.n = 0

    def evaluate(self, action: Any, observation: Any) -> float:
        self.n += 1
        return float(self.n)

    def reset(self) -> None:
        self.n = 0


class EpisodeLength(Rubric):
    high = 100.0

    def evaluate_episode(self, steps: Any) -> float:
        return float(len(steps))


class SlowAsync(AsyncRubric):
    def __init__(self, delay: float, value: float = 0.5, **base: Any) -> None:
        super().__init__(**base)
        self.delay, self.value = delay, value

    async def aevaluate(self, action: Any, observation: Any) -> float:
        await asyncio.sleep(self.delay)
        return self.value


def test_a_float_in_range_is_the_score_and_names_default_to_snake_case() -> None:
    result = Const(0.25).score("a", "o")
    assert isinstance(result, RubricResult)
    assert result.score == 0.25 and result.components == {} and result.error is None
    assert Const(1).name == "const" and EpisodeLength().name == "episode_length"
    assert Const(1, name="mine").name == "mine"
    assert type("LLMJudge", (Const,), {})(1).name == "llm_judge"
    assert type(Const(1).score(None, None).score) is float  # ints are converted


@pytest.mark.parametrize("value", [1.5, -0.1, math.nan, math.inf])
def test_out_of_range_is_an_error_naming_the_rubric(value: float) -> None:
    with pytest.raises(RubricError, match=r"rubric 'fmt': score .* outside its declared range \[0.0, 1.0\]") as err:
        Const(value, name="fmt").score(None, None)
    assert err.value.rubric == "fmt"


@pytest.mark.parametrize("value", ["0.5", None, True, [1.0]])
def test_a_non_number_is_an_error(value: Any) -> None:
    with pytest.raises(RubricError, match="rubric 'const'"):
        Const(value).score(None, None)


def test_declared_range_is_used_and_checked() -> None:
    assert Const(-3.0, low=-5, high=5).score(None, None).score == -3.0
    with pytest.raises(RubricError, match=r"\[-1.0, 0.0\]"):
        Const(0.5, low=-1, high=0).score(None, None)
    with pytest.raises(ConfigError, match="low < high"):
        Const(0.5, low=1, high=1)


def test_an_exception_becomes_a_rubric_error_with_its_cause() -> None:
    with pytest.raises(RubricError, match=r"rubric 'boom': raised KeyError") as err:
        Boom().score(None, None)
    assert isinstance(err.value.__cause__, KeyError)


def test_fallback_policy_scores_the_declared_fallback_and_says_why() -> None:
    result = Boom(on_error="fallback", fallback_score=0.1).score(None, None)
    assert result.score == 0.1 and result.error is not None and "KeyError" in result.error
    out_of_range = Const(7.0, on_error="fallback", fallback_score=0.0).score(None, None)
    assert out_of_range.score == 0.0 and "outside its declared range" in (out_of_range.error or "")
    assert out_of_range.to_json()["error"] == out_of_range.error


def test_fallback_configuration_is_checked_at_construction() -> None:
    with pytest.raises(ConfigError, match="needs a fallback_score"):
        Boom(on_error="fallback")
    with pytest.raises(ConfigError, match="outside its range"):
        Boom(on_error="fallback", fallback_score=2.0)
    with pytest.raises(ConfigError, match="only used with on_error='fallback'"):
        Boom(fallback_score=0.0)
    with pytest.raises(ConfigError, match="'raise' or 'fallback'"):
        Boom(on_error="ignore")  # type: ignore[arg-type]


def test_a_subclass_must_implement_a_scoring_method() -> None:
    with pytest.raises(RuleViolation, match="implements neither"):
        type("Nothing", (Rubric,), {})


def test_step_rubric_scores_an_episode_by_its_last_step_and_reset_clears_state() -> None:
    counter = Counter()
    assert [counter.score(None, None).score for _ in range(3)] == [1.0, 2.0, 3.0]
    counter.reset()
    assert counter.score(None, None).score == 1.0
    steps = [Step("a", "o1"), Step("b", "o2")]
    assert Const(0.75).score_episode(steps).score == 0.75
    with pytest.raises(RubricError, match="empty episode"):
        Const(0.75).score_episode([])


def test_episode_rubric_refuses_single_steps() -> None:
    rubric = EpisodeLength()
    assert rubric.per_step is False and Const(1.0).per_step is True
    assert rubric.score_episode([Step(1, 2, 0.5)] * 4).score == 4.0
    with pytest.raises(RuleViolation, match="whole episodes only"):
        rubric.score(None, None)
    with pytest.raises(RuleViolation):  # a programming error is never hidden by a fallback
        EpisodeLength(on_error="fallback", fallback_score=0.0).score(None, None)


def test_deterministic_inputs_give_identical_results() -> None:
    a, b = Counter(), Counter()
    first = [a.score(i, i).to_json() for i in range(5)]
    assert first == [b.score(i, i).to_json() for i in range(5)]


async def test_async_rubric_is_awaited_and_sync_rubrics_work_through_ascore() -> None:
    slow = SlowAsync(0.0, value=0.5)
    assert slow.is_async and not Const(1.0).is_async
    assert (await slow.ascore(None, None)).score == 0.5
    assert (await Const(0.2).ascore(None, None)).score == 0.2
    assert (await slow.ascore_episode([Step(1, 1)])).score == 0.5
    with pytest.raises(RuleViolation, match="is async"):
        slow.score(None, None)


async def test_async_range_violations_and_timeouts_are_faults() -> None:
    with pytest.raises(RubricError, match="outside its declared range"):
        await SlowAsync(0.0, value=3.0).ascore(None, None)
    with pytest.raises(RubricError, match=r"rubric 'slow_async': timed out after 0.05 s"):
        await SlowAsync(5.0, timeout=0.05).ascore(None, None)
    fallback = await SlowAsync(5.0, timeout=0.05, on_error="fallback", fallback_score=0.0).ascore(None, None)
    assert fallback.score == 0.0 and "timed out" in (fallback.error or "")
    with pytest.raises(ConfigError, match="timeout must be > 0"):
        SlowAsync(0.0, timeout=0)


def test_components_flatten_with_dotted_names() -> None:
    inner = RubricResult(0.5, {"exact": 1.0, "judge": 0.0}, rationales={"judge": "wrong"})
    leaf = RubricResult(1.0, rationale="fine")
    fell = RubricResult(0.0, error="rubric 'x': boom")
    components, rationales = components_of({"answer": inner, "format": leaf, "x": fell})
    assert components == {"answer": 0.5, "answer.exact": 1.0, "answer.judge": 0.0, "format": 1.0, "x": 0.0}
    assert rationales == {"answer.judge": "wrong", "format": "fine", "x": "fallback: rubric 'x': boom"}


def test_describe_reports_range_and_policy() -> None:
    doc = Boom(on_error="fallback", fallback_score=0.0, low=0, high=2).describe()
    assert doc == {"name": "boom", "class": "Boom", "low": 0.0, "high": 2.0, "async": False,
                   "per_step": True, "on_error": "fallback", "fallback_score": 0.0}


def test_an_adapter_base_routes_evaluate_to_an_upstream_style_forward() -> None:
    """How the compatibility layer's classes sit on this contract: an abstract base whose
    ``evaluate`` calls ``forward``; user subclasses implement only ``forward``."""

    class ForwardRubric(Rubric):
        _abstract = True

        def __init__(self) -> None:
            super().__init__(low=-math.inf, high=math.inf)  # upstream rubrics declare no range

        def forward(self, action: Any, observation: Any) -> float:
            raise NotImplementedError

        def evaluate(self, action: Any, observation: Any) -> float:
            return self.forward(action, observation)

        def __call__(self, action: Any, observation: Any) -> float:
            return self.score(action, observation).score

    class Upstream(ForwardRubric):
        def forward(self, action: Any, observation: Any) -> float:
            return 2.0 * action

    rubric = Upstream()
    assert rubric(3, None) == 6.0 and rubric.name == "upstream"
    with pytest.raises(RubricError, match="outside its declared range"):
        rubric(math.nan, None)


def test_for_session_shares_a_stateless_rubric_and_copies_a_stateful_one() -> None:
    const = Const(0.5)
    assert not const.keeps_episode_state() and const.for_session() is const
    counter = Counter()
    assert counter.keeps_episode_state()
    mine, yours = counter.for_session(), counter.for_session()
    assert mine is not counter and mine is not yours
    mine.score(None, None)
    mine.score(None, None)
    yours.reset()
    assert mine.score(None, None).score == 3.0
