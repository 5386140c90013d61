"""Typed action, observation and state of the chess env."""

from __future__ import annotations

from pydantic import Field

from openenv.types import Action, Observation, State

__all__ = ["ChessAction", "ChessObservation", "ChessState"]


class ChessAction(Action):
    """One move of the agent, in UCI (``e2e4``, ``e7e8q``) or SAN (``e4``, ``Nf3``, ``O-O``)."""

    move: str = Field(description="The move, in UCI (e2e4) or SAN (Nf3) notation", min_length=1, max_length=16)


class ChessObservation(Observation):
    """The position after the agent's move and the opponent's reply."""

    fen: str = Field(description="The position in Forsyth-Edwards Notation")
    board: list[str] = Field(description="The board as 8 text rows, rank 8 first (upper case = white)")
    agent_color: str = Field(description="The side the agent plays: 'white' or 'black'")
    turn: str = Field(description="Side to move: 'white' or 'black'")
    legal_actions: list[str] = Field(default_factory=list, description="Legal agent moves in UCI (empty once over)")
    agent_move: str | None = Field(default=None, description="The agent's last move, in UCI")
    opponent_move: str | None = Field(default=None, description="The opponent's last reply, in UCI")
    result: str | None = Field(default=None, description="'1-0', '0-1' or '1/2-1/2' once the game is over")
    termination: str | None = Field(default=None, description="Why the game ended (checkmate, stalemate, ...)")
    truncated: bool = Field(default=False, description="True when the game hit the env's move limit")


class ChessState(State):
    """The game so far."""

    fen: str = Field(default="", description="Current position (FEN)")
    moves: list[str] = Field(default_factory=list, description="Every move of the game, in UCI")
    agent_color: str = Field(default="white", description="The agent's side")
    opponent: str = Field(default="", description="Who plays the other side")
    done: bool = Field(default=False, description="Whether the game is over")
