"""The wire types of the counter env (pydantic models: the server validates actions with them)."""

from __future__ import annotations

from pydantic import Field

from openenv.types import Action, Observation, State

__all__ = ["CountAction", "CountObservation", "CountState"]


class CountAction(Action):
    """How much to add (1 to 3)."""

    amount: int = Field(ge=1, le=3, description="How much to add to the counter (1-3)")


class CountObservation(Observation):
    """The counter and the target it must reach."""

    value: int = Field(description="The counter")
    target: int = Field(description="The value to reach exactly")


class CountState(State):
    """Episode id, step count, and where the counter stands."""

    value: int = 0
    target: int = 0
