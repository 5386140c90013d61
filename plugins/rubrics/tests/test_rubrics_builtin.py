"""Built-in leaf rubrics: matching, regex, numbers, math, code tests, penalties, field paths."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from openenv.errors import ConfigError
from openenv.rubric import RubricError
from openenv_rubrics.builtin import (
    CodeTestPassRate,
    ExactMatch,
    FormatPenalty,
    LengthPenalty,
    MathEquivalence,
    NormalizedMatch,
    NumericMatch,
    RegexMatch,
    normalize_text,
)


@dataclass
class Action:
    message: str


@dataclass
class Obs:
    metadata: dict[str, Any]


def test_exact_match_literal_and_from_the_observation() -> None:
    assert ExactMatch(expected="Paris").score("Paris", None).score == 1.0
    assert ExactMatch(expected="Paris").score("paris", None).score == 0.0
    assert ExactMatch(expected="Paris", case_sensitive=False).score("PARIS", None).score == 1.0
    rubric = ExactMatch(response="action.message", target="observation.metadata.answer")
    assert rubric.score(Action("4"), Obs({"answer": "4"})).score == 1.0
    assert rubric.score(Action("5"), Obs({"answer": "4"})).score == 0.0
    # dict inputs (a stored rollout) resolve the same paths
    assert rubric.score({"message": "4"}, {"metadata": {"answer": "4"}}).score == 1.0


def test_exact_match_configuration_and_missing_fields() -> None:
    with pytest.raises(ConfigError, match="exactly one of expected"):
        ExactMatch()
    with pytest.raises(ConfigError, match="exactly one of expected"):
        ExactMatch(expected="a", target="observation.a")
    with pytest.raises(ConfigError, match="must start with 'action' or 'observation'"):
        ExactMatch(expected="a", response="message")
    rubric = ExactMatch(response="action.message", target="observation.metadata.answer")
    with pytest.raises(RubricError, match="no key 'answer' \\(keys: other\\)"):
        rubric.score(Action("4"), Obs({"other": 1}))
    with pytest.raises(RubricError, match="Action has no attribute 'msg'"):
        ExactMatch(expected="4", response="action.msg").score(Action("4"), None)
    with pytest.raises(RubricError, match="expected a string"):
        ExactMatch(expected="4").score(4, None)  # never str()-ed silently


def test_normalized_match() -> None:
    assert normalize_text("  The  Eiffel-Tower! ") == "eiffeltower"
    rubric = NormalizedMatch(expected="The Eiffel Tower")
    assert rubric.score("eiffel   tower.", None).score == 1.0
    assert rubric.score("eiffel towers", None).score == 0.0
    assert NormalizedMatch(expected="a cat", drop_articles=False).score("cat", None).score == 0.0
    assert NormalizedMatch(expected="Ｃａｆé").score("café", None).score == 1.0  # NFKC


def test_regex_modes_flags_and_bad_patterns() -> None:
    assert RegexMatch(pattern=r"\d+").score("123", None).score == 1.0
    assert RegexMatch(pattern=r"\d+").score("a123", None).score == 0.0
    assert RegexMatch(pattern=r"\d+", mode="search").score("a123", None).score == 1.0
    assert RegexMatch(pattern=r"answer: \w+", flags="i").score("ANSWER: yes", None).score == 1.0
    with pytest.raises(ConfigError, match="invalid regular expression"):
        RegexMatch(pattern="(")
    with pytest.raises(ConfigError, match="unknown regex flag"):
        RegexMatch(pattern="a", flags="q")
    with pytest.raises(ConfigError, match="mode must be"):
        RegexMatch(pattern="a", mode="find")


def test_numeric_match_tolerance_and_extraction() -> None:
    strict = NumericMatch(expected="3.14159", abs_tol=1e-3)
    assert strict.score("3.1416", None).score == 1.0
    assert strict.score("3.15", None).score == 0.0
    assert strict.score("about 3.1416", None).score == 0.0  # strict: the whole answer is one number
    assert strict.score(3.1416, None).score == 1.0
    assert NumericMatch(expected=1000).score("1,000", None).score == 1.0
    last = NumericMatch(expected=42, extract="last")
    assert last.score("6 * 7 = 42", None).score == 1.0
    assert last.score("42 or maybe 41", None).score == 0.0
    assert last.score("no idea", None).score == 0.0
    assert NumericMatch(expected=200, rel_tol=0.01).score("201.5", None).score == 1.0
    assert NumericMatch(expected=200, rel_tol=0.01).score("203", None).score == 0.0
    assert NumericMatch(expected=1).score("nan", None).score == 0.0
    with pytest.raises(RubricError, match="not a finite number"):
        NumericMatch(expected="seven").score("7", None)
    with pytest.raises(ConfigError):
        NumericMatch(expected=1, abs_tol=-1)


def test_math_equivalence_uses_math_verify() -> None:
    half = MathEquivalence(expected="\\frac{1}{2}")
    assert half.score("$\\frac{2}{4}$", None).score == 1.0
    assert half.score("0.5", None).score == 1.0
    assert half.score("The answer is $\\boxed{\\frac{1}{2}}$.", None).score == 1.0
    assert half.score("0.6", None).score == 0.0
    assert half.score("no maths here", None).score == 0.0
    poly = MathEquivalence(target="observation.answer")
    assert poly.score("$(x+1)^2$", {"answer": "x^2 + 2x + 1"}).score == 1.0
    assert poly.score("$(x-1)^2$", {"answer": "x^2 + 2x + 1"}).score == 0.0
    with pytest.raises(RubricError, match="could not parse the reference"):
        MathEquivalence(expected="???").score("1", None)


def test_code_test_pass_rate() -> None:
    rubric = CodeTestPassRate()
    result = rubric.score(None, {"tests": {"passed": 3, "total": 4}})
    assert result.score == 0.75 and result.components == {"passed": 3.0, "total": 4.0}
    assert CodeTestPassRate(all_or_nothing=True).score(None, {"tests": {"passed": 3, "total": 4}}).score == 0.0
    assert CodeTestPassRate(all_or_nothing=True).score(None, {"tests": {"passed": 4, "total": 4}}).score == 1.0

    @dataclass
    class Results:
        passed: int
        total: int

    assert CodeTestPassRate(results="observation").score(None, Results(1, 2)).score == 0.5
    with pytest.raises(RubricError, match="no tests were run"):
        rubric.score(None, {"tests": {"passed": 0, "total": 0}})
    assert CodeTestPassRate(empty_score=0.0).score(None, {"tests": {"passed": 0, "total": 0}}).score == 0.0
    with pytest.raises(RubricError, match="passed=5 > total=4"):
        rubric.score(None, {"tests": {"passed": 5, "total": 4}})
    with pytest.raises(RubricError, match="expected a non-negative integer"):
        rubric.score(None, {"tests": {"passed": "3", "total": 4}})


def test_code_test_pass_rate_on_a_step_that_ran_no_tests() -> None:
    with pytest.raises(RubricError, match=r"field 'observation\.tests' not found"):
        CodeTestPassRate().score(None, {"stdout": ""})
    with pytest.raises(RubricError, match="expected a non-negative integer"):
        CodeTestPassRate().score(None, {"tests": None})
    skip = CodeTestPassRate(results="observation.metadata.tests", missing_score=0.0)
    assert skip.score(None, {"metadata": {}}).score == 0.0
    assert skip.score(None, {"metadata": {"tests": None}}).score == 0.0
    assert skip.score(None, {}).score == 0.0
    assert skip.score(None, {"metadata": {"tests": {"passed": 1, "total": 4}}}).score == 0.25
    with pytest.raises(ConfigError, match=r"missing_score=2\.0 is outside"):
        CodeTestPassRate(missing_score=2.0)


def test_length_penalty() -> None:
    rubric = LengthPenalty(max_length=10, limit=20)
    assert (rubric.low, rubric.high) == (-1.0, 0.0)
    assert rubric.score("x" * 10, None).score == 0.0
    assert rubric.score("x" * 15, None).score == -0.5
    assert rubric.score("x" * 500, None).score == -1.0
    words = LengthPenalty(max_length=2, limit=4, unit="words")
    assert words.score("one two three", None).score == -0.5
    with pytest.raises(ConfigError, match="max_length < limit"):
        LengthPenalty(max_length=5, limit=5)


def test_format_penalty() -> None:
    rubric = FormatPenalty(pattern=r"<think>.*</think>\s*<answer>.*</answer>")
    assert rubric.score("<think>hmm\nok</think> <answer>4</answer>", None).score == 0.0
    assert rubric.score("4", None).score == -1.0
    harsh = FormatPenalty(pattern="yes|no", penalty=-2.0)
    assert harsh.low == -2.0 and harsh.score("maybe", None).score == -2.0
    with pytest.raises(ConfigError, match="penalty must be negative"):
        FormatPenalty(pattern="a", penalty=0.5)


def test_every_builtin_is_deterministic() -> None:
    rubrics = [ExactMatch(expected="a"), NormalizedMatch(expected="a"), RegexMatch(pattern="a"),
               NumericMatch(expected=1), MathEquivalence(expected="1"), LengthPenalty(max_length=1, limit=3),
               FormatPenalty(pattern="a")]
    for rubric in rubrics:
        assert [rubric.score("a b", None).to_json() for _ in range(3)] == [rubric.score("a b", None).to_json()] * 3
