"""``openenv.core.client_types``: ``StepResult`` is the kernel's (same fields as upstream's dataclass)."""

from __future__ import annotations

from typing import TypeVar

from openenv.types import StepResult

__all__ = ["ObsT", "StateT", "StepResult"]

ObsT = TypeVar("ObsT")
StateT = TypeVar("StateT")
