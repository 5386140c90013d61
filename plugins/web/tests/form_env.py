"""A test env whose action exercises every kind of form field the page generates, and whose
observation carries a base64 PNG (a plain string), a declared image (``openenv.types.Image``), a
render-hinted grid and reward components."""

from __future__ import annotations

import base64
import struct
import uuid
import zlib
from typing import Any, Literal

from pydantic import BaseModel, Field

from openenv.env import Environment
from openenv.types import Action, Image, Observation, State

__all__ = ["FormAction", "FormEnv", "FormObservation"]


class Target(BaseModel):
    x: int = Field(ge=0, le=3, description="Column, 0 to 3")
    y: int = Field(ge=0, le=3, description="Row, 0 to 3")


class FormAction(Action):
    colour: Literal["red", "green", "blue"] = Field(description="Paint colour")
    fill: bool = Field(default=False, description="Fill the whole row")
    strength: float = Field(default=0.5, ge=0.0, le=1.0, description="How much paint")
    target: Target = Field(description="Where to paint")
    tags: list[str] = Field(default_factory=list, description="Free labels")
    note: str | None = Field(default=None, description="Optional note")


class FormObservation(Observation):
    board: list[list[str]] = Field(default_factory=list)
    picture: str = ""
    #: Declared: the page shows this one, though the undeclared ``picture`` comes first.
    screen: Image | None = None
    reward_components: dict[str, float] = Field(default_factory=dict)
    last: dict[str, Any] = Field(default_factory=dict)


def _png(size: int = 4) -> str:
    """A tiny grey PNG, base64 (built here so the test needs no image library)."""
    raw = b"".join(b"\x00" + b"\x80" * size for _ in range(size))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", size, size, 8, 0, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
    return base64.b64encode(png).decode()


class FormEnv(Environment[FormAction, FormObservation, State]):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self) -> None:
        super().__init__()
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)
        self._board = [["." for _ in range(4)] for _ in range(4)]

    def _observe(self, reward: float, last: dict[str, Any]) -> FormObservation:
        return FormObservation(board=[row[:] for row in self._board], picture=_png(), reward=reward,
                               screen=base64.b64decode(_png(2)),
                               reward_components={"paint": reward, "bonus": 0.0} if last else {},
                               last=last, metadata={"render": {"kind": "grid", "field": "board"}})

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> FormObservation:
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        self._board = [["." for _ in range(4)] for _ in range(4)]
        return self._observe(0.0, {})

    def step(self, action: FormAction, timeout_s: float | None = None, **kwargs: Any) -> FormObservation:  # type: ignore[override]
        self._state.step_count += 1
        mark = action.colour[0].upper()
        cols = range(4) if action.fill else [action.target.x]
        for x in cols:
            self._board[action.target.y][x] = mark
        return self._observe(action.strength, action.model_dump(exclude={"metadata"}))

    @property
    def state(self) -> State:
        return self._state
