"""openenvkit-rubrics: named rubrics, composition, an LLM judge and re-scoring of stored rollouts.

The rubric contract (``Rubric``, ``AsyncRubric``, ``RubricResult``, ``RubricError``, ``Step``)
lives in the kernel module ``openenv.rubric``; this package registers implementations of it.
Importing this package is cheap: classes load on first attribute access.
"""

from __future__ import annotations

from openenv.lazy import lazy_exports

_HOME = {
    **dict.fromkeys(["CodeTestPassRate", "ExactMatch", "FormatPenalty", "LengthPenalty", "MathEquivalence",
                     "NormalizedMatch", "NumericMatch", "RegexMatch"], "builtin"),
    **dict.fromkeys(["AllOf", "AnyOf", "Max", "Min", "Sequential", "Threshold", "WeightedSum"], "compose"),
    "DiscountedReturn": "trajectory",
    "LLMJudge": "judge",
    **dict.fromkeys(["build_rubric", "parse_spec", "rubric_from_spec"], "config"),
    "rescore": "rescore",
}


__getattr__, __dir__, __all__ = lazy_exports(__name__, {name: f".{home}" for name, home in _HOME.items()})
