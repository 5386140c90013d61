"""The shaping built-ins: ``length_score`` and ``fields_equal``."""

from __future__ import annotations

import math

import pytest

from openenv.errors import ConfigError
from openenv.rubric import RubricError
from openenv.rubric_spec import rubric_from_spec
from openenv_rubrics.shaping import FieldsEqual, LengthScore


def test_length_score_scales_chars_or_words() -> None:
    assert LengthScore(scale=0.1, response="action").score("hello", None).score == pytest.approx(0.5)
    words = LengthScore(unit="words", response="action")
    assert words.score("a b  c", None).score == 3.0
    assert LengthScore().high == math.inf and LengthScore(max_length=10, scale=0.5).high == 5.0


def test_length_score_past_its_bound_is_a_fault_and_bad_config_is_refused() -> None:
    with pytest.raises(RubricError, match="outside its declared range"):
        LengthScore(max_length=3).score("toolong", None)
    with pytest.raises(ConfigError, match="scale"):
        LengthScore(scale=0)
    with pytest.raises(ConfigError, match="unit"):
        LengthScore(unit="lines")


def test_fields_equal_from_a_spec() -> None:
    rubric = rubric_from_spec('fields_equal={"left": "observation.a", "right": "observation.b", '
                              '"on_equal": 1.0, "on_differ": -0.5}')
    assert isinstance(rubric, FieldsEqual) and (rubric.low, rubric.high) == (-0.5, 1.0)
    assert rubric.score(None, {"a": [1, 2], "b": [1, 2]}).score == 1.0
    assert rubric.score(None, {"a": [1, 2], "b": [2, 2]}).score == -0.5
    with pytest.raises(ConfigError, match="different"):
        FieldsEqual(left="action", right="action", on_equal=1.0, on_differ=1.0)
