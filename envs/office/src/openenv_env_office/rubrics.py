"""The office env's rubric: the grader's named checks as the step's reward components.

``OfficeChecks`` is the env class's declared rubric (``OfficeEnv.rubric``), so a server applies it
to every step: the score is the env's own reward (the grader ran inside ``finish``, where the
database is), and on the step that ends the episode — or hands over the follow-up — the checks
travel on the wire as ``reward_components`` (``office_checks.event_created`` ...) for clients,
``collect`` and ``eval``. It reads only the observation; it never grades anything itself.
"""

from __future__ import annotations

from typing import Any

from openenv.rubric import Rubric, RubricResult

__all__ = ["OfficeChecks"]


class OfficeChecks(Rubric):
    """The env's reward, with ``finish``'s checks (1.0 passed, 0.0 failed) as components."""

    name = "office_checks"

    def evaluate(self, action: Any, observation: Any) -> RubricResult:
        reward = float(getattr(observation, "reward", None) or 0.0)
        result = getattr(observation, "result", None)
        data = result.get("structured_content") if isinstance(result, dict) else None
        checks = data.get("checks") if isinstance(data, dict) else None
        if getattr(observation, "tool_name", None) != "finish" or not isinstance(checks, dict):
            return RubricResult(reward)
        return RubricResult(reward, components={str(k): float(v) for k, v in checks.items()})
