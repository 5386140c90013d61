"""``openenv.core.rubrics.trajectory``: rubrics that score whole episodes.

``TrajectoryRubric`` records each ``(action, observation)``, returns ``intermediate_reward`` until an
observation has ``done``, then ``score_trajectory``; ``compute_step_rewards`` assigns credit per
step. ``ExponentialDiscountingTrajectoryRubric`` gives step ``t`` of ``T`` the reward
``gamma ** (T - 1 - t) * score``. Call ``reset()`` (the env's ``_reset_rubric``) between episodes.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

from openenv.core.rubrics.base import Rubric
from openenv.rubric_compose import discounted_credit

__all__ = ["ExponentialDiscountingTrajectoryRubric", "TrajectoryRubric"]


class TrajectoryRubric(Rubric):
    """Scores the episode once it is done; subclasses define the score and the credit assignment."""

    def __init__(self, intermediate_reward: float = 0.0) -> None:
        super().__init__()
        self.intermediate_reward = intermediate_reward
        self._trajectory: list[tuple[Any, Any]] = []

    def forward(self, action: Any, observation: Any) -> float:
        self._trajectory.append((action, observation))
        if getattr(observation, "done", False):
            return self.score_trajectory(self._trajectory)
        return self.intermediate_reward

    @abstractmethod
    def score_trajectory(self, trajectory: list[tuple[Any, Any]]) -> float:
        """The score of a finished episode."""

    @abstractmethod
    def compute_step_rewards(self) -> list[float]:
        """One reward per recorded step."""

    def reset(self) -> None:
        self._trajectory = []

    @property
    def trajectory(self) -> list[tuple[Any, Any]]:
        """A copy of the steps recorded since the last reset."""
        return list(self._trajectory)

    def state_dict(self) -> dict[str, Any]:
        return {"intermediate_reward": self.intermediate_reward}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if "intermediate_reward" in state:
            self.intermediate_reward = state["intermediate_reward"]


class ExponentialDiscountingTrajectoryRubric(TrajectoryRubric):
    """Credit ``gamma ** (T - 1 - t) * score`` to step ``t``; ``gamma`` in [0, 1]."""

    def __init__(self, gamma: float = 0.99, intermediate_reward: float = 0.0) -> None:
        super().__init__(intermediate_reward=intermediate_reward)
        if not 0.0 <= gamma <= 1.0:
            raise ValueError(f"gamma must be in [0, 1], got {gamma}")
        self.gamma = gamma

    def compute_step_rewards(self) -> list[float]:
        if not self._trajectory:
            return []
        return discounted_credit(self.score_trajectory(self._trajectory), self.gamma, len(self._trajectory))

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "gamma": self.gamma}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        if "gamma" in state:
            self.gamma = state["gamma"]
