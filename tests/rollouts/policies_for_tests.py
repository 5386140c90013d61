"""Policies the rollouts tests name as ``module:callable``."""

from __future__ import annotations

import time
from typing import Any


def two(observation: Any, ctx: Any) -> dict[str, Any]:
    return {"n": 2}


def flaky(observation: Any, ctx: Any) -> dict[str, Any]:
    """Episode 1 raises, episode 2 gives an action the env refuses, the others add 1."""
    if ctx.episode == 1:
        raise RuntimeError("policy blew up on purpose")
    if ctx.episode == 2:
        return {"n": 99}
    return {"n": 1}


def slow(observation: Any, ctx: Any) -> dict[str, Any]:
    time.sleep(0.05)
    return {"n": 1}


async def async_one(observation: Any, ctx: Any) -> dict[str, Any]:
    return {"n": 1}


def unsendable(observation: Any, ctx: Any) -> dict[str, Any]:
    """Episode 1 returns an action that is not JSON, episode 2 one that contains itself; the others add 1."""
    if ctx.episode == 1:
        return {"n": object()}
    if ctx.episode == 2:
        action: dict[str, Any] = {"n": 1}
        action["self"] = action
        return action
    return {"n": 1}


def one(observation: Any, ctx: Any) -> dict[str, Any]:
    return {"n": 1}


def slow_one(observation: Any, ctx: Any) -> dict[str, Any]:
    time.sleep(0.05)
    return {"n": 1}
