"""Baselines for the Atari env: a uniform random policy and a scripted Pong paddle tracker.

Both read only the observation (its dict or model), as an agent would. The tracker reads Pong's
RAM: byte 51 is the right (agent's) paddle's top, byte 54 the ball's height (0 while no ball is in
play); RIGHT moves the paddle up, LEFT down. It is a baseline, not an optimal player: it returns
most balls and clearly beats random (tested), which is what ``openenv validate`` checks.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from openenv_env_atari.models import AtariObservation

__all__ = ["PONG_BALL_Y", "PONG_PADDLE_Y", "pong_tracker", "random_policy"]

PONG_PADDLE_Y = 51
PONG_BALL_Y = 54
# The paddle's centre is about 12 scanlines below its top; within 3 of the ball it holds still.
_CENTRE = 12
_DEAD_ZONE = 3


def _data(obs: AtariObservation | Mapping[str, Any]) -> Mapping[str, Any]:
    return obs.model_dump() if isinstance(obs, AtariObservation) else obs


def random_policy(obs: AtariObservation | Mapping[str, Any], rng: random.Random | None = None) -> dict[str, str]:
    """A uniformly random legal action, as an action dict."""
    legal = _data(obs)["legal_actions"]
    if not legal:
        raise ValueError("the episode is over: no legal actions")
    return {"action": (rng or random).choice(legal)}


def pong_tracker(obs: AtariObservation | Mapping[str, Any]) -> dict[str, str]:
    """Pong: move the paddle towards the ball's height (NOOP when no ball is in play)."""
    data = _data(obs)
    if data.get("game", "pong") != "pong":
        raise ValueError(f"pong_tracker plays Pong only, this is {data.get('game')!r}; use random_policy")
    ram = data["ram"]
    ball, paddle = ram[PONG_BALL_Y], ram[PONG_PADDLE_Y] + _CENTRE
    if ball == 0 or abs(ball - paddle) <= _DEAD_ZONE:
        return {"action": "NOOP"}
    return {"action": "LEFT" if ball > paddle else "RIGHT"}
