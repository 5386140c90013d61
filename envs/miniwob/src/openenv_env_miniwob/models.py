"""Typed actions, observation and state of the MiniWoB env.

An action is ``MiniWoBAction(command=...)`` where ``command`` is one of a discriminated union
(``kind``): ``click`` an element by ``ref``, ``click_at`` a point ``x``, ``y``, ``type`` text into an
element, press a ``key``, ``scroll`` the wheel, or ``noop``. On the wire:
``{"command": {"kind": "click", "ref": 4}}``.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from openenv.types import Action, Image, ImageSpec, Observation, State

__all__ = [
    "Click",
    "ClickAt",
    "Command",
    "Element",
    "Key",
    "MiniWoBAction",
    "MiniWoBObservation",
    "MiniWoBState",
    "Noop",
    "Scroll",
    "TypeText",
]

#: Width and height (CSS pixels) of MiniWoB's task area, the part of the page the screenshot shows.
TASK_WIDTH, TASK_HEIGHT = 160, 210


class _Command(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Click(_Command):
    """Click an element (the centre of its box) by ``ref``."""

    kind: Literal["click"] = "click"
    ref: int = Field(description="ref of an element of the observation's elements")


class ClickAt(_Command):
    """Click the point ``x``, ``y`` (CSS pixels) of the task area."""

    kind: Literal["click_at"] = "click_at"
    x: float = Field(ge=0, lt=TASK_WIDTH, description="x in CSS pixels, from the task area's left edge")
    y: float = Field(ge=0, lt=TASK_HEIGHT, description="y in CSS pixels, from the task area's top edge")


class TypeText(_Command):
    """Focus an editable element (click it) and type ``text`` with the keyboard."""

    kind: Literal["type"] = "type"
    ref: int = Field(description="ref of an <input>, <textarea> or contenteditable element")
    text: str = Field(max_length=1000, description="Text typed key by key")


class Key(_Command):
    """Press one key (Playwright key names: Enter, Tab, Backspace, ArrowDown, a, Control+a, ...)."""

    kind: Literal["key"] = "key"
    key: str = Field(min_length=1, max_length=64, description="Key name, e.g. Enter, Tab, ArrowUp, Control+a")


class Scroll(_Command):
    """Turn the mouse wheel by ``dx``, ``dy`` CSS pixels where the pointer is (the task area's centre
    unless a click moved it)."""

    kind: Literal["scroll"] = "scroll"
    dx: float = Field(default=0.0, ge=-5000, le=5000, description="Horizontal wheel delta")
    dy: float = Field(default=0.0, ge=-5000, le=5000, description="Vertical wheel delta")


class Noop(_Command):
    """Do nothing (time still passes: MiniWoB tasks have a wall-clock limit)."""

    kind: Literal["noop"] = "noop"


Command = Annotated[Click | ClickAt | TypeText | Key | Scroll | Noop, Field(discriminator="kind")]


class MiniWoBAction(Action):
    """One browser command: ``{"command": {"kind": "click", "ref": 4}}`` (see the ``kind`` values)."""

    command: Command = Field(
        description="click (ref), click_at (x, y), type (ref, text), key (key), scroll (dx, dy), noop")


class Element(BaseModel):
    """One visible element of the task area; ``ref`` is stable for the whole episode."""

    ref: int = Field(description="Stable id of the element in this episode (what click/type take)")
    parent: int | None = Field(default=None, description="ref of the parent element (None for <body>)")
    tag: str = Field(description="Lower-case tag name (input elements: input_<type>, e.g. input_text)")
    text: str = Field(default="", description="The element's own text (its direct text nodes), whitespace folded")
    value: str | None = Field(default=None, description="Current value of an input, textarea or select")
    checked: bool | None = Field(default=None, description="Checkbox or radio state")
    focused: bool = Field(default=False, description="Whether the element has the keyboard focus")
    id: str = Field(default="", description="The element's id attribute")
    classes: str = Field(default="", description="The element's class attribute")
    bbox: tuple[float, float, float, float] = Field(description="left, top, width, height in CSS pixels")


class MiniWoBObservation(Observation):
    """The task's instruction, its visible elements, a screenshot and the task's own reward."""

    task: str = Field(description="The MiniWoB task being played (e.g. 'click-button')")
    utterance: str = Field(default="", description="The task's instruction, as the page states it")
    elements: list[Element] = Field(default_factory=list, description="Visible elements of the task area")
    image: Annotated[Image, ImageSpec(width=TASK_WIDTH, height=TASK_HEIGHT, format="png")] | None = Field(
        default=None, description="Screenshot of the 160x210 task area as a PNG data URL (data:image/png;base64,...)")
    error: str | None = Field(default=None, description="Why the last command could not be carried out (the "
                              "episode goes on), e.g. an unknown ref; None when it was")
    reason: str | None = Field(default=None, description="The task's reason for ending the episode, if it gave one")
    raw_reward: float = Field(default=0.0, description="The task's reward without MiniWoB's time discount")
    timed_reward: float = Field(default=0.0, description="MiniWoB's official reward: positive rewards scaled by "
                                "the time left")
    truncated: bool = Field(default=False, description="True when the task's time limit (or max_steps) ended it")
    steps_left: int = Field(default=0, description="Steps left before max_steps truncates the episode")

    def element(self, ref: int) -> Element | None:
        """The element with ``ref`` (None when it is not visible)."""
        return next((e for e in self.elements if e.ref == ref), None)


class MiniWoBState(State):
    """Episode id, step count, task, seed and split of the episode."""

    task: str = Field(default="", description="The MiniWoB task being played")
    seed: int | None = Field(default=None, description="The page's random seed (Math.seedrandom)")
    split: str = Field(default="train", description="MiniWoB data mode the page generates from (train/test)")
    reward_kind: str = Field(default="raw", description="Which reward is the step reward: raw or timed")
    done: bool = Field(default=False, description="Whether the episode is over")
    score: float = Field(default=0.0, description="Sum of rewards this episode")

