"""``openenv.core.rubrics``: upstream's rubric API (RFC 004) on the kernel's rubric interface.

``Rubric``, the containers (``Sequential``, ``Gate``, ``WeightedSum``, ``RubricList``,
``RubricDict``) and the trajectory rubrics. ``LLMJudge`` is not provided: it needs upstream's LLM
client wrappers; write a ``Rubric`` whose ``async def forward`` calls your model's SDK instead.
"""

from __future__ import annotations

from typing import Any

from openenv.core._unsupported import unsupported_callable
from openenv.core.rubrics.base import Rubric
from openenv.core.rubrics.containers import Gate, RubricDict, RubricList, Sequential, WeightedSum
from openenv.core.rubrics.trajectory import ExponentialDiscountingTrajectoryRubric, TrajectoryRubric

__all__ = [
    "ExponentialDiscountingTrajectoryRubric",
    "Gate",
    "Rubric",
    "RubricDict",
    "RubricList",
    "Sequential",
    "TrajectoryRubric",
    "WeightedSum",
]


def __getattr__(name: str) -> Any:
    if name == "LLMJudge":
        return unsupported_callable(
            "`openenv.core.rubrics.LLMJudge`",
            "subclass Rubric with an `async def forward(self, action, observation)` that calls your "
            "model provider's SDK and parses the score",
            "It depends on upstream's LLM client wrappers, which are not provided")
    raise AttributeError(f"module 'openenv.core.rubrics' has no attribute {name!r}")
