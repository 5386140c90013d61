"""Typed action, observation and state of Connect Four."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from openenv.types import Action, Observation, State

__all__ = ["OPPONENTS", "Connect4Action", "Connect4Observation", "Connect4State", "Opponent"]

Opponent = Literal["random", "heuristic"]
#: The built-in opponents: ``random`` plays any legal column, ``heuristic`` wins or blocks when it can.
OPPONENTS: tuple[Opponent, ...] = ("random", "heuristic")


class Connect4Action(Action):
    """Drop one of the agent's pieces into a column."""

    column: int = Field(ge=0, le=6, description="Column to drop the piece into, 0 (left) to 6 (right)")


class Connect4Observation(Observation):
    """The board after the agent's move and the opponent's reply."""

    board: list[str] = Field(
        description="The board, top row first, 7 characters each: 'X', 'O' or '.' (empty)"
    )
    piece: str = Field(description="The agent's piece, 'X' or 'O' (X moves first)")
    legal_actions: list[dict[str, int]] = Field(
        default_factory=list,
        description="Columns that are not full, as action dicts ({'column': 3}); empty once done",
    )
    opponent_column: int | None = Field(
        default=None, description="The column the opponent last played (None before its first move)"
    )
    winner: Literal["agent", "opponent", "draw"] | None = Field(
        default=None, description="Who won once the episode is over ('draw' for a full board)"
    )
    truncated: bool = Field(default=False, description="Always false: a game ends by a win or a full board")


class Connect4State(State):
    """Episode id, step count, the board, and the game's settings."""

    board: list[str] = Field(default_factory=list, description="The board, top row first")
    piece: str = Field(default="X", description="The agent's piece")
    opponent: str = Field(default="heuristic", description="The built-in opponent")
    winner: str | None = Field(default=None, description="'agent', 'opponent', 'draw' or None")
    done: bool = Field(default=False, description="Whether the game is over")
