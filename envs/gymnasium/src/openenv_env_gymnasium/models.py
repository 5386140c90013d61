"""Typed action, observation and state of the Gymnasium env."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from openenv.types import Action, Image, Observation, State

__all__ = ["GymAction", "GymObservation", "GymState"]


class GymAction(Action):
    """An action of the served Gymnasium env, as JSON: an int for ``Discrete``, a (nested) list of
    numbers for ``Box``/``MultiDiscrete``/``MultiBinary``, an object for ``Dict``, a list for ``Tuple``.
    It is checked against the env's action space (``action_space`` in the reset observation)."""

    action: int | float | list[Any] | dict[str, Any] = Field(description="The action, as JSON")


class GymObservation(Observation):
    """The env's observation as JSON, with Gymnasium's end flags and info."""

    env_id: str = Field(description="The Gymnasium env id")
    observation: Any = Field(description="The observation as JSON (numpy arrays as lists)")
    terminated: bool = Field(default=False, description="The MDP reached a terminal state")
    truncated: bool = Field(default=False, description="The episode was cut (time limit)")
    info: dict[str, Any] = Field(default_factory=dict, description="The env's info dict, as JSON")
    legal_actions: list[Any] = Field(
        default_factory=list,
        description="Discrete spaces: every allowed action (respecting an action_mask); other spaces: a few "
        "seeded samples of the space. Empty once done",
    )
    # An image (rgb_array) or text (ansi) in one field, as before the Image type: the wire value is
    # unchanged, and the schema still declares the image (consumers check each value).
    render: Image | str | None = Field(
        default=None,
        description="When reset with render=True (or 'ansi'/'rgb_array'): the env's text render, or its image "
        "as a PNG data URL (data:image/png;base64,...)",
    )
    action_space: dict[str, Any] | None = Field(default=None, description="The action space (reset only)")
    observation_space: dict[str, Any] | None = Field(default=None, description="The observation space (reset only)")


class GymState(State):
    env_id: str = Field(default="", description="The Gymnasium env id")
    total_reward: float = Field(default=0.0, description="Sum of the episode's rewards")
    done: bool = Field(default=False, description="Whether the episode is over")
