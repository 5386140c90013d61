"""The oracle of the reasoning-gym env: the dataset's own answer to the question."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from openenv_env_reasoning_gym.env import make_dataset
from openenv_env_reasoning_gym.models import ReasoningObservation

__all__ = ["solve", "oracle"]


def solve(obs: ReasoningObservation, config: dict[str, Any] | None = None) -> str:
    """Rebuild the seeded dataset named in ``obs`` and return its answer to the question.

    ``obs.metadata`` carries the seed and size; pass the same ``config`` as to ``reset``.
    """
    dataset = make_dataset(obs.task, obs.metadata.get("seed"), int(obs.metadata["size"]), config)
    return str(dataset[obs.index]["answer"])


def oracle(obs: ReasoningObservation | Mapping[str, Any]) -> dict[str, Any]:
    """``solve`` as the manifest's ``oracle`` (an observation dict in, an action dict out)."""
    o = obs if isinstance(obs, ReasoningObservation) else ReasoningObservation.model_validate(obs)
    return {"answer": solve(o)}
