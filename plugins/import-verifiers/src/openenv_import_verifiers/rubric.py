"""``verifiers_rewards``: the server rubric of every imported env, so that verifiers' named rewards
travel as the wire's ``reward_components`` (docs/protocol.md §2.7).

The env already scored the reply with the task's own functions (``VerifiersEnv.step_async``); this
rubric only reports that score and its parts: the reward stays verifiers' total, and the components
are ``verifiers_rewards`` (the total; a served rubric is named as registered) and
``verifiers_rewards.<reward name>`` (each weighted reward). A rubric cannot
re-score, as verifiers' rewards need the task's data, which only the env holds.
"""

from __future__ import annotations

from typing import Any

from openenv.rubric import Rubric, RubricResult

__all__ = ["VerifiersRewards"]


class VerifiersRewards(Rubric):
    """The verifiers score an imported env put on its observation, with its named rewards."""

    # verifiers rewards are weighted sums with no declared bound; the range only rules out NaN.
    low = -1e12
    high = 1e12

    def evaluate(self, action: Any, observation: Any) -> RubricResult:
        reward = getattr(observation, "reward", None)
        parts = getattr(observation, "rewards", None) or {}
        # A step that was not scored (no reply yet) has no verifiers reward: 0.0, no components.
        return RubricResult(float(reward) if reward is not None else 0.0, components=dict(parts))
