"""The oracle of the reasoning-gym env: the dataset's own answer to the question."""

from __future__ import annotations

from typing import Any

from openenv_env_reasoning_gym.env import make_dataset
from openenv_env_reasoning_gym.models import ReasoningObservation

__all__ = ["solve"]


def solve(obs: ReasoningObservation, config: dict[str, Any] | None = None) -> str:
    """Rebuild the seeded dataset named in ``obs`` and return its answer to the question.

    ``obs.metadata`` carries the seed and size; pass the same ``config`` as to ``reset``.
    """
    dataset = make_dataset(obs.task, obs.metadata.get("seed"), int(obs.metadata["size"]), config)
    return str(dataset[obs.index]["answer"])
