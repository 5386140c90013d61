"""Typed action and observation of the echo environment."""

from __future__ import annotations

from pydantic import Field

from openenv.types import Action, Observation

__all__ = ["EchoAction", "EchoObservation"]


class EchoAction(Action):
    """The message to echo back (at least one character)."""

    message: str = Field(min_length=1, description="Message to echo back")


class EchoObservation(Observation):
    """The echoed message and its length (``"ready"`` and 0 right after ``reset``)."""

    echoed_message: str = Field(description="The message the env received")
    message_length: int = Field(default=0, ge=0, description="Length of the echoed message")
