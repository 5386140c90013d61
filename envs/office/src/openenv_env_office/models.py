"""Typed observation and state of the office env (its actions are the kernel's tool actions)."""

from __future__ import annotations

from pydantic import Field

from openenv.types import Observation, State

__all__ = ["OfficeObservation", "OfficeState"]


class OfficeObservation(Observation):
    """What ``reset`` shows the agent: the user's request and the day it is."""

    task_id: str = Field(description="Id of the task being played (e.g. 'schedule_meeting-3')")
    today: str = Field(description="The current day in the app, YYYY-MM-DD; the user's dates are relative to it")
    weekday: str = Field(description="The current day's name (e.g. 'Monday')")
    request: str = Field(description="What the user asks for; details may be missing: ask_user for them")
    user_email: str = Field(description="The user's own address (the sender of sent mail)")
    max_steps: int = Field(description="Tool calls allowed before the episode ends unfinished (reward 0)")


class OfficeState(State):
    """Episode id, step count, the task and where the episode stands."""

    task_id: str | None = Field(default=None, description="Id of the task being played")
    part: int = Field(default=1, description="1 for the request, 2 once the user added a follow-up")
    done: bool = Field(default=False, description="Whether the episode is over")
    questions: int = Field(default=0, description="How many times the agent called ask_user")
