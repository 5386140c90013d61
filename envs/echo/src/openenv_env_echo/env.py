"""The echo environment, in a synchronous and an asynchronous flavour.

Promises: ``reset`` returns ``echoed_message="ready"``, length 0, reward 0.0; each ``step`` echoes
the message with reward ``0.1 × len(message)`` and metadata ``{"original_message", "step"}``. The
served reward is the env's declared rubric, ``length_score`` from ``openenv_rubrics`` (component
``length``; ``openenv serve echo --rubric NAME`` replaces it); the env computes the same value itself
so that it also holds in-process, without a server;
``state`` is ``State(episode_id, step_count)``. ``reset`` honours ``episode_id`` (a fresh UUID4 when
absent) and accepts ``seed`` (the echo is deterministic, so it only records it).
"""

from __future__ import annotations

import uuid
from typing import Any

from openenv.env import Environment
from openenv.types import EnvironmentMetadata, State
from openenv_env_echo.models import EchoAction, EchoObservation
from openenv_rubrics.shaping import LengthScore

__all__ = ["REWARD_PER_CHAR", "AsyncEchoEnv", "EchoEnv"]

#: Reward per character of the echoed message.
REWARD_PER_CHAR = 0.1


class EchoEnv(Environment[EchoAction, EchoObservation, State]):
    """Echoes each message back. Instances share nothing, and a step is a few attribute writes."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    # A step is cheap pure Python: run it inline on the event loop instead of hopping to a thread.
    BLOCKING = False
    #: The server scores each step with this rubric (the served reward and its components).
    rubric = LengthScore(name="length", response="action.message", scale=REWARD_PER_CHAR)

    def __init__(self) -> None:
        super().__init__()
        # Plain attributes, read into a State only when asked: a step is then a few attribute
        # writes, with no pydantic assignment on the per-step path.
        self._episode_id: str | None = None
        self._steps = 0
        self.seed: int | None = None

    def reset(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> EchoObservation:
        self.seed = seed
        self._episode_id = episode_id or str(uuid.uuid4())
        self._steps = 0
        return EchoObservation(echoed_message="ready", message_length=0, reward=0.0, done=False)

    def step(
        self, action: EchoAction, timeout_s: float | None = None, **kwargs: Any
    ) -> EchoObservation:
        self._steps = steps = self._steps + 1
        message = action.message
        return EchoObservation(
            echoed_message=message,
            message_length=len(message),
            reward=REWARD_PER_CHAR * len(message),
            done=False,
            metadata={"original_message": message, "step": steps},
        )

    @property
    def state(self) -> State:
        return State(episode_id=self._episode_id, step_count=self._steps)

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="echo",
            description="Echoes each message back; reward 0.1 per character.",
            version="0.1.0",
        )


class AsyncEchoEnv(EchoEnv):
    """The same env with native ``reset_async``/``step_async`` (awaited on the server's loop).

    Exists so that the async execution path can be exercised and benchmarked against the inline
    sync path with identical behaviour.
    """

    async def reset_async(
        self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any
    ) -> EchoObservation:
        return EchoEnv.reset(self, seed=seed, episode_id=episode_id, **kwargs)

    async def step_async(
        self, action: EchoAction, timeout_s: float | None = None, **kwargs: Any
    ) -> EchoObservation:
        return EchoEnv.step(self, action, timeout_s=timeout_s, **kwargs)

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="echo_async",
            description="Asynchronous echo env (reset_async/step_async); reward 0.1 per character.",
            version="0.1.0",
        )
