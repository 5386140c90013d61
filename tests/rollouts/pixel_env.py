"""A tiny env with a declared image observation for the rollouts tests: a 4x3 screen whose first
pixel's red channel is the running total (so each frame says which step made it), and an optional
``caption`` that is text or an image (``Image | str``)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

import numpy as np
from pydantic import Field

from openenv import Action, Environment, Observation, State
from openenv.types import Image, ImageSpec

WIDTH, HEIGHT = 4, 3


class PixelAction(Action):
    n: int = Field(ge=0, le=1, description="How much to add (0 or 1)")


class PixelObservation(Observation):
    total: int = 0
    screen: Annotated[Image, ImageSpec(width=WIDTH, height=HEIGHT)] | None = Field(
        default=None, description="The screen: pixel (0, 0) is red by the total")
    caption: Image | str | None = None


def frame(total: int) -> np.ndarray:
    pixels = np.zeros((HEIGHT, WIDTH, 3), np.uint8)
    pixels[0, 0] = (40 * total, 0, 0)
    pixels[-1, -1] = (0, 0, 255)
    return pixels


class PixelEnv(Environment[PixelAction, PixelObservation, State]):
    SUPPORTS_CONCURRENT_SESSIONS = True
    BLOCKING = False

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> PixelObservation:
        self._state = State(episode_id=episode_id or str(uuid.uuid4()))
        self._total = 0
        return PixelObservation(total=0, screen=frame(0), caption="start", reward=0.0)

    def step(self, action: PixelAction, timeout_s: float | None = None, **kwargs: Any) -> PixelObservation:
        self._state.step_count += 1
        self._total += action.n
        return PixelObservation(total=self._total, screen=frame(self._total), caption=frame(self._total),
                                reward=float(action.n), done=self._state.step_count >= 3)

    @property
    def state(self) -> State:
        return self._state
