"""Typed action, observation and state of Wordle."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from openenv.types import Action, Observation, State
from openenv_env_wordle.feedback import Colour

__all__ = ["GuessResult", "WordleAction", "WordleObservation", "WordleState"]


class WordleAction(Action):
    """One guess: a five-letter word from the env's word list (any case)."""

    guess: str = Field(pattern=r"^[A-Za-z]{5}$", description="A five-letter word from the word list")


class GuessResult(BaseModel):
    """A past guess and its feedback."""

    model_config = ConfigDict(extra="forbid")

    word: str = Field(description="The guess, lowercase")
    feedback: list[Colour] = Field(description="Per letter: 'green', 'yellow' or 'grey'")
    pattern: str = Field(description="The feedback as five symbols: G green, Y yellow, - grey")


class WordleObservation(Observation):
    """The guesses so far with their feedback, and the words that may still be guessed."""

    history: list[GuessResult] = Field(default_factory=list, description="Every guess so far, in order")
    guesses_left: int = Field(description="Guesses still allowed")
    legal_actions: list[dict[str, str]] = Field(
        default_factory=list,
        description="The word list minus the words already guessed, as action dicts ({'guess': 'crane'}); "
        "empty once done",
    )
    solved: bool = Field(default=False, description="True once the secret was guessed")
    answer: str | None = Field(default=None, description="The secret, revealed once the episode is over")
    truncated: bool = Field(default=False, description="Always false: the episode ends solved or out of guesses")


class WordleState(State):
    """Episode id, step count, the guesses and whether the game is over (the secret stays hidden)."""

    guesses: list[str] = Field(default_factory=list, description="The guesses so far")
    max_guesses: int = Field(default=6, description="Guesses allowed in the episode")
    solved: bool = Field(default=False, description="Whether the secret was guessed")
    done: bool = Field(default=False, description="Whether the episode is over")
