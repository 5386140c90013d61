"""Typed action, observation and state of 2048."""

from __future__ import annotations

from pydantic import Field

from openenv.types import Action, Observation, State
from openenv_env_twenty48.board import Move

__all__ = ["Twenty48Action", "Twenty48Observation", "Twenty48State"]


class Twenty48Action(Action):
    """Slide every tile one way."""

    move: Move = Field(description="Direction to slide: up, down, left or right")


class Twenty48Observation(Observation):
    """The board after the move and the new tile."""

    board: list[list[int]] = Field(description="Four rows of four tiles, 0 for an empty square")
    score: int = Field(description="Points so far: the sum of every merged tile")
    max_tile: int = Field(description="The largest tile on the board")
    legal_actions: list[dict[str, str]] = Field(
        default_factory=list,
        description="The moves that change the board, as action dicts ({'move': 'left'}); empty once done",
    )
    won: bool = Field(default=False, description="True once a tile reached the target (2048 by default)")
    truncated: bool = Field(default=False, description="Always false: the game ends won or with no move left")


class Twenty48State(State):
    """Episode id, step count, the board, the score and the target."""

    board: list[list[int]] = Field(default_factory=list, description="The board")
    score: int = Field(default=0, description="Points so far")
    target: int = Field(default=2048, description="The tile that wins the game")
    won: bool = Field(default=False, description="Whether the target was reached")
    done: bool = Field(default=False, description="Whether the game is over")
