"""Typed action, observation and state of the grid world."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from openenv.types import Action, Observation, State

__all__ = ["MOVES", "GridAction", "GridObservation", "GridState", "Move"]

Move = Literal["up", "down", "left", "right"]

#: Every move, in a fixed order (``legal_actions`` keeps this order).
MOVES: tuple[Move, ...] = ("up", "down", "left", "right")


class GridAction(Action):
    """One move of the agent."""

    move: Move = Field(description="Direction to move: up, down, left or right")


class GridObservation(Observation):
    """Where the agent is, where it must go, and which moves are possible from here."""

    position: list[int] = Field(description="Agent position [row, col]")
    goal: list[int] = Field(description="Goal position [row, col]")
    grid: list[str] = Field(
        description="The map, one string per row: '#' wall, '.' free, 'G' goal, 'A' agent"
    )
    legal_actions: list[Move] = Field(
        default_factory=list,
        description="Moves that do not run into a wall or the edge (empty once the episode is over)",
    )
    truncated: bool = Field(
        default=False, description="True when the episode ended by the step limit, not the goal"
    )


class GridState(State):
    """Episode id, step count, and the agent's position."""

    position: list[int] = Field(default_factory=list, description="Agent position [row, col]")
    goal: list[int] = Field(default_factory=list, description="Goal position [row, col]")
    done: bool = Field(default=False, description="Whether the episode is over")
