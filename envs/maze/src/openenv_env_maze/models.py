"""Typed action, observation and state of the maze."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from openenv.types import Action, Observation, State

__all__ = ["MOVES", "MazeAction", "MazeObservation", "MazeState", "Move"]

Move = Literal["up", "down", "left", "right"]

#: Every move, in a fixed order (``legal_actions`` keeps this order).
MOVES: tuple[Move, ...] = ("up", "down", "left", "right")


class MazeAction(Action):
    """One move of the agent, one square of the map."""

    move: Move = Field(description="Direction to move: up, down, left or right")


class MazeObservation(Observation):
    """The map, where the agent is, where the exit is, and which moves are open."""

    grid: list[str] = Field(
        description="The map, one string per row: '#' wall, '.' open, 'E' exit, 'A' agent"
    )
    position: list[int] = Field(description="Agent position [row, col] on the map")
    goal: list[int] = Field(description="Exit position [row, col] on the map")
    legal_actions: list[dict[str, str]] = Field(
        default_factory=list,
        description="The moves that do not run into a wall, as action dicts ({'move': 'down'}); "
        "empty once the episode is over",
    )
    steps_left: int = Field(description="Steps left before the episode is truncated")
    truncated: bool = Field(
        default=False, description="True when the episode ended by the step limit, not the exit"
    )


class MazeState(State):
    """Episode id, step count, the maze's size and seed, and the agent's position."""

    size: list[int] = Field(default_factory=list, description="Maze size in cells [rows, cols]")
    seed: int | None = Field(default=None, description="Seed the maze was generated from")
    position: list[int] = Field(default_factory=list, description="Agent position [row, col]")
    goal: list[int] = Field(default_factory=list, description="Exit position [row, col]")
    done: bool = Field(default=False, description="Whether the episode is over")
