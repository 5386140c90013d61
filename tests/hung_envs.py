"""Envs whose step never returns on its own (issue 34 item 2), one per runner kind.

A step marks itself started (a file in ``$OPENENV_TEST_HUNG_DIR``, so that a worker process can
say so too), then waits on ``RELEASE`` for at most ``HANG_S``: far past every bound the tests
check, yet never forever, so a thread the server abandons ends once the test is over.
"""

from __future__ import annotations

import asyncio
import os
import threading
import uuid
from pathlib import Path
from typing import Any

from openenv.env import Environment
from openenv.testing import EchoAction, EchoObservation
from openenv.tools import CallToolAction, CallToolObservation
from openenv.types import State

__all__ = ["HANG_S", "RELEASE", "HungAsyncEnv", "HungEnv", "HungSingleThreadEnv", "HungToolEnv", "started"]

HANG_S = 60.0
RELEASE = threading.Event()
CLOSED: list[str] = []  # episode ids of envs whose close() ran (in this process)


def _mark() -> None:
    folder = os.environ.get("OPENENV_TEST_HUNG_DIR")
    if folder:
        Path(folder, f"{os.getpid()}-{uuid.uuid4().hex}").touch()


def started() -> int:
    """Hung steps started so far (in any process)."""
    folder = os.environ.get("OPENENV_TEST_HUNG_DIR")
    return len(list(Path(folder).iterdir())) if folder else 0


class HungEnv(Environment[EchoAction, EchoObservation, State]):
    """Runs on a thread of its own session (the default for a sync env)."""

    def __init__(self) -> None:
        super().__init__()
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> EchoObservation:
        return EchoObservation(echoed_message="ready", reward=0.0)

    def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
        _mark()
        RELEASE.wait(HANG_S)
        return EchoObservation(echoed_message="late")

    @property
    def state(self) -> State:
        return self._state

    def close(self) -> None:
        CLOSED.append(self._state.episode_id or "")


class HungSingleThreadEnv(HungEnv):
    """Every session on one shared thread (``REQUIRES_SINGLE_THREAD_EXECUTOR``)."""

    REQUIRES_SINGLE_THREAD_EXECUTOR = True


class HungAsyncEnv(HungEnv):
    """Awaited on the event loop."""

    async def step_async(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
        _mark()
        await asyncio.sleep(HANG_S)
        return EchoObservation(echoed_message="late")


class HungToolEnv(Environment[CallToolAction, CallToolObservation, State]):
    """An MCP-style env (kind B): a ``tools/call`` is a step, and it hangs."""

    def __init__(self) -> None:
        super().__init__()
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Any:
        return CallToolObservation(tool_name="", result={"content": []})

    def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
        _mark()
        RELEASE.wait(HANG_S)
        return CallToolObservation(tool_name="late", result={"content": []})

    @property
    def state(self) -> State:
        return self._state

    def close(self) -> None:
        CLOSED.append(self._state.episode_id or "")
