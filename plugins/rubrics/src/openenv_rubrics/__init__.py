"""openenvkit-rubrics: named rubrics, composition, an LLM judge and re-scoring of stored rollouts.

The rubric contract (``Rubric``, ``AsyncRubric``, ``RubricResult``, ``RubricError``, ``Step``)
lives in the kernel module ``openenv.rubric``; this package registers implementations of it.
Importing this package is cheap: classes load on first attribute access.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "AllOf", "AnyOf", "CodeTestPassRate", "DiscountedReturn", "ExactMatch", "FormatPenalty", "LLMJudge",
    "LengthPenalty", "MathEquivalence", "Max", "Min", "NormalizedMatch", "NumericMatch", "RegexMatch",
    "Sequential", "Threshold", "WeightedSum", "build_rubric", "parse_spec", "rescore", "rubric_from_spec",
]

_HOME = {
    **dict.fromkeys(["CodeTestPassRate", "ExactMatch", "FormatPenalty", "LengthPenalty", "MathEquivalence",
                     "NormalizedMatch", "NumericMatch", "RegexMatch"], "builtin"),
    **dict.fromkeys(["AllOf", "AnyOf", "Max", "Min", "Sequential", "Threshold", "WeightedSum"], "compose"),
    "DiscountedReturn": "trajectory",
    "LLMJudge": "judge",
    **dict.fromkeys(["build_rubric", "parse_spec", "rubric_from_spec"], "config"),
    "rescore": "rescore",
}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module 'openenv_rubrics' has no attribute {name!r}")
    return getattr(importlib.import_module(f"openenv_rubrics.{home}"), name)
