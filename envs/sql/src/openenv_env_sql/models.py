"""Typed action, observation and state of the SQL env."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from openenv.types import Action, Observation, State

__all__ = ["SqlAction", "SqlObservation", "SqlState"]


class SqlAction(Action):
    """One attempt: a single read-only SQLite statement (a SELECT or WITH query)."""

    query: str = Field(description="One SQLite SELECT statement", min_length=1, max_length=20_000)


class SqlObservation(Observation):
    """The task, and how the last attempt went."""

    task_id: str = Field(description="Id of the task")
    feedback: str = Field(default="", description="A sentence about the last attempt")
    error: str | None = Field(default=None, description="The SQL error of the last attempt, if any")
    correct: bool | None = Field(default=None, description="Whether the last attempt matched (None before any)")
    attempts_left: int = Field(description="Attempts remaining in this episode")
    columns: list[str] = Field(default_factory=list, description="Column names of the last result")
    rows: list[list[Any]] = Field(default_factory=list, description="The last result's first rows")
    row_count: int = Field(default=0, description="How many rows the last result had")
    question: str = Field(description="What the query must return, in words")
    ordered: bool = Field(description="Whether the row order counts (the question asks for one)")
    schema_sql: str = Field(description="The CREATE TABLE statements of the database")


class SqlState(State):
    task_id: str = Field(default="", description="Id of the task")
    attempts: int = Field(default=0, description="Attempts made")
    solved: bool = Field(default=False, description="Whether the last attempt matched")
    done: bool = Field(default=False, description="Whether the episode is over")
