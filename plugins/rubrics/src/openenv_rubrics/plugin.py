"""Plugin hooks of openenvkit-rubrics: the built-in rubrics and the ``openenv rubrics`` commands."""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.hookspecs import hookimpl

if TYPE_CHECKING:
    from openenv.registry import Registry

__all__ = ["RUBRICS", "openenv_register_commands", "openenv_register_rubrics"]

#: name -> (reference, description); references stay lazy (nothing is imported to list them).
RUBRICS: dict[str, tuple[str, str]] = {
    "exact_match": ("openenv_rubrics.builtin:ExactMatch", "1 if the answer equals the reference exactly."),
    "normalized_match": ("openenv_rubrics.builtin:NormalizedMatch",
                         "1 if answer and reference match after case/punctuation/space normalisation."),
    "regex": ("openenv_rubrics.builtin:RegexMatch", "1 if the answer matches a regular expression."),
    "numeric_match": ("openenv_rubrics.builtin:NumericMatch", "1 if the answer is a number within tolerance."),
    "math_equivalence": ("openenv_rubrics.builtin:MathEquivalence",
                         "1 if the answer is mathematically equivalent to the reference (math-verify)."),
    "code_tests": ("openenv_rubrics.builtin:CodeTestPassRate", "Fraction of code tests passed (passed/total)."),
    "length_penalty": ("openenv_rubrics.builtin:LengthPenalty", "0 up to max_length, down to -1 at a limit."),
    "format_penalty": ("openenv_rubrics.builtin:FormatPenalty",
                       "0 if the answer has the required format, else a penalty."),
    "length_score": ("openenv_rubrics.shaping:LengthScore", "scale x the length of a text field (0 for empty)."),
    "fields_equal": ("openenv_rubrics.shaping:FieldsEqual",
                     "on_equal if two fields hold equal values, else on_differ."),
    "llm_judge": ("openenv_rubrics.judge:LLMJudge",
                  "An LLM judge over an OpenAI-compatible chat-completions endpoint (strict JSON scores)."),
    "weighted_sum": ("openenv_rubrics.compose:WeightedSum", "Weighted sum of child rubrics."),
    "all_of": ("openenv_rubrics.compose:AllOf", "1 if every child passes its threshold, else 0."),
    "any_of": ("openenv_rubrics.compose:AnyOf", "1 if any child passes its threshold, else 0."),
    "threshold": ("openenv_rubrics.compose:Threshold", "A child's score binarised at a threshold."),
    "sequential": ("openenv_rubrics.compose:Sequential", "Fail-fast chain of gates ending in a scorer."),
    "max": ("openenv_rubrics.compose:Max", "The highest child score."),
    "min": ("openenv_rubrics.compose:Min", "The lowest child score."),
    "discounted_return": ("openenv_rubrics.trajectory:DiscountedReturn",
                          "Discounted sum of per-step rewards over an episode."),
}


@hookimpl
def openenv_register_rubrics(registry: Registry) -> None:
    for name, (ref, description) in RUBRICS.items():
        registry.register(name, ref, description=description)


@hookimpl
def openenv_register_commands(registry: Registry) -> None:
    registry.register("rubrics", "openenv_rubrics.cli:app",
                      description="List rubrics and re-score stored rollouts with one.")
