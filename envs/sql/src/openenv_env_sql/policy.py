"""The oracle of the SQL env: the task's reference query."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from openenv_env_sql.models import SqlObservation
from openenv_env_sql.tasks import TASKS

__all__ = ["solve", "oracle"]


def solve(obs: SqlObservation) -> str:
    """The reference query of the task in ``obs`` (it always scores 1.0)."""
    return next(task.reference for task in TASKS if task.id == obs.task_id)


def oracle(obs: SqlObservation | Mapping[str, Any]) -> dict[str, Any]:
    """``solve`` as the manifest's ``oracle`` (an observation dict in, an action dict out)."""
    o = obs if isinstance(obs, SqlObservation) else SqlObservation.model_validate(obs)
    return {"query": solve(o)}
