"""Rubrics of the SQL env: how an attempt's result set is scored against the reference's.

Both implement the kernel rubric contract (``openenv.rubric.Rubric``): the env calls
``rubric.score(action, attempt)`` with the ``SqlAction`` and an ``Attempt`` (the rows the query
returned, the reference rows, and whether order counts) and gets a range-checked ``RubricResult``. ``ExactResult`` (the
default) gives 1.0 for an equal result set, else 0.0; ``RowOverlap`` gives partial credit. Both are
registered as rubrics (``sql_exact``, ``sql_overlap``), and ``SqlEnv(rubric=...)`` takes either
or any other ``openenv.rubric.Rubric`` that scores an ``Attempt``. The env scores inside ``step``
(the reference rows never leave the server, so the server's own rubric could not see them).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from openenv.rubric import Rubric

__all__ = ["Attempt", "ExactResult", "RowOverlap", "same_result"]


@dataclass(frozen=True)
class Attempt:
    rows: list[tuple[Any, ...]]
    reference: list[tuple[Any, ...]]
    ordered: bool


def same_result(got: list[tuple[Any, ...]], want: list[tuple[Any, ...]], *, ordered: bool) -> bool:
    """Whether two result sets are equal: as lists when order counts, else as multisets of rows."""
    if ordered:
        return got == want
    return Counter(got) == Counter(want)


class ExactResult(Rubric):
    """1.0 when the rows equal the reference's (a multiset, or a list when order counts), else 0.0."""

    name = "sql_exact"

    def evaluate(self, action: Any, observation: Any) -> float:
        attempt: Attempt = observation
        return 1.0 if same_result(attempt.rows, attempt.reference, ordered=attempt.ordered) else 0.0


class RowOverlap(Rubric):
    """Partial credit: the multiset Jaccard overlap of the rows (shared / union), 1.0 only when
    equal; an ordered task scores 1.0 only in the right order (the right rows in another order: 0.5)."""

    name = "sql_overlap"

    def evaluate(self, action: Any, observation: Any) -> float:
        attempt: Attempt = observation
        got, want = Counter(attempt.rows), Counter(attempt.reference)
        union = sum((got | want).values())
        overlap = sum((got & want).values()) / union if union else 1.0
        if attempt.ordered and overlap == 1.0 and attempt.rows != attempt.reference:
            return 0.5
        return round(overlap, 6)
