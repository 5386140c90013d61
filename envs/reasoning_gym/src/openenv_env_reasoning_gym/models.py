"""Typed action, observation and state of the reasoning-gym env."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from openenv.types import Action, Observation, State

__all__ = ["ReasoningAction", "ReasoningObservation", "ReasoningState"]


class ReasoningAction(Action):
    """The agent's final answer, as text (the task's question says the expected format)."""

    answer: str = Field(description="The answer to the question", max_length=100_000)


class ReasoningObservation(Observation):
    """The question; after the answer, its score and the reference answer."""

    task: str = Field(description="The reasoning-gym task (dataset) name")
    question: str = Field(description="The question to answer")
    index: int = Field(description="Index of the question in the seeded dataset")
    score: float | None = Field(default=None, description="reasoning-gym's score of the answer, 0..1 (after it)")
    feedback: str = Field(default="", description="A sentence about the answer")
    reference_answer: str | None = Field(default=None, description="The dataset's answer, shown once done")
    task_metadata: dict[str, Any] = Field(default_factory=dict, description="The entry's metadata (once done)")


class ReasoningState(State):
    task: str = Field(default="", description="The task name")
    seed: int | None = Field(default=None, description="The dataset seed")
    size: int = Field(default=0, description="The dataset size")
    index: int = Field(default=0, description="The question's index")
    done: bool = Field(default=False, description="Whether the question was answered")
