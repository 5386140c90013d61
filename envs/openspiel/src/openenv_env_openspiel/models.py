"""Typed action, observation and state of the OpenSpiel env."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from openenv.types import Action, Observation, State

__all__ = ["OpenSpielAction", "OpenSpielObservation", "OpenSpielState"]


class OpenSpielAction(Action):
    """The agent's move: an action id from ``legal_actions`` or its name from ``legal_action_names``."""

    action: int | str = Field(description="An OpenSpiel action id (int) or its name (e.g. 'x(1,1)', 'Bet')")


class OpenSpielObservation(Observation):
    """What the agent's player sees, and what it may do."""

    game: str = Field(description="The loaded game, as an OpenSpiel game string")
    agent_player: int = Field(description="The player the agent controls")
    current_player: int = Field(description="Player to move (the agent's while the game goes on; -4 once over)")
    legal_actions: list[int] = Field(default_factory=list, description="Legal action ids (empty once over)")
    legal_action_names: list[str] = Field(default_factory=list, description="Names of the legal actions, same order")
    observation: str = Field(description="The agent player's observation (or information state) as text")
    history: list[int] = Field(
        default_factory=list,
        description="Every action so far, chance outcomes included (imperfect-information games: only once over)",
    )
    others: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Moves by opponents and chance since the agent's last move: {player, action, name} "
        "(imperfect-information games: only once over)",
    )
    returns: list[float] = Field(default_factory=list, description="Every player's return (final once done)")
    truncated: bool = Field(default=False, description="True when the env's step limit ended the game")


class OpenSpielState(State):
    game: str = Field(default="", description="The loaded game")
    history: list[int] = Field(default_factory=list, description="Every action so far")
    agent_player: int = Field(default=0, description="The agent's player")
    opponent: str = Field(default="", description="The scripted opponents' policy")
    done: bool = Field(default=False, description="Whether the game is over")
