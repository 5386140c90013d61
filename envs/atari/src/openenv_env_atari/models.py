"""Typed action, observation and state of the Atari env."""

from __future__ import annotations

from typing import Annotated, Literal, get_args

from pydantic import Field

from openenv.types import Action, Image, ImageSpec, Observation, State

__all__ = ["ACTION_NAMES", "SCREEN_HEIGHT", "SCREEN_WIDTH", "ActionName", "AtariAction", "AtariObservation",
           "AtariState", "ObsType"]

#: The 18 joystick actions of the Atari 2600, in ALE's numbering (``ale_py.Action``).
ActionName = Literal[
    "NOOP", "FIRE", "UP", "RIGHT", "LEFT", "DOWN", "UPRIGHT", "UPLEFT", "DOWNRIGHT", "DOWNLEFT",
    "UPFIRE", "RIGHTFIRE", "LEFTFIRE", "DOWNFIRE", "UPRIGHTFIRE", "UPLEFTFIRE", "DOWNRIGHTFIRE", "DOWNLEFTFIRE",
]
ACTION_NAMES: tuple[str, ...] = get_args(ActionName)
#: The Atari 2600 screen ALE renders (width x height).
SCREEN_WIDTH, SCREEN_HEIGHT = 160, 210

#: ``ram``: only the 128 bytes of console RAM; ``grayscale``: RAM plus a downsampled grayscale frame.
ObsType = Literal["grayscale", "ram"]


class AtariAction(Action):
    """One joystick action, held for ``frame_skip`` frames. Only the game's ``legal_actions`` are taken."""

    action: ActionName = Field(description="Joystick action name, one of the observation's legal_actions")


class AtariObservation(Observation):
    """What the agent sees after an action: RAM, optionally a small grayscale frame and a PNG image."""

    game: str = Field(description="The game being played (ale-py ROM id, e.g. 'pong')")
    ram: list[int] = Field(description="The console's 128 bytes of RAM (0..255 each)")
    frame: list[list[int]] | None = Field(
        default=None,
        description="The screen downsampled to frame_size x frame_size grayscale (rows of 0..255); "
        "None when obs_type='ram'",
    )
    image: Annotated[Image, ImageSpec(width=SCREEN_WIDTH, height=SCREEN_HEIGHT, format="png")] | None = Field(
        default=None, description="The full-size colour screen as a PNG data URL (data:image/png;base64,...), "
        "only when reset(image=True)",
    )
    legal_actions: list[str] = Field(default_factory=list, description="The game's action set (action names)")
    lives: int = Field(default=0, description="Lives left, as the game reports them")
    score: float = Field(default=0.0, description="Sum of rewards this episode")
    frame_number: int = Field(default=0, description="Emulator frames played this episode")
    steps_left: int = Field(description="Agent steps left before truncation")
    truncated: bool = Field(default=False, description="True when the episode ended by max_steps, not the game")


class AtariState(State):
    """Episode id, step count, game, seed and the emulator settings of the episode."""

    game: str = Field(default="", description="The game being played")
    seed: int | None = Field(default=None, description="The emulator seed of the episode")
    frame_skip: int = Field(default=4, description="Emulator frames per agent step")
    sticky_actions: float = Field(default=0.25, description="Probability that the previous action repeats a frame")
    score: float = Field(default=0.0, description="Sum of rewards this episode")
    done: bool = Field(default=False, description="Whether the episode is over")
