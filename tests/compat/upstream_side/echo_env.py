"""A typed echo environment written against upstream ``openenv==0.10.0``'s public API.

Runs only in the upstream venv (``openenv`` there is upstream's package). It is built the way
upstream's documentation and ``openenv init`` template build an env: ``Action``/``Observation``
subclasses from ``openenv.core.env_server.types``, an ``Environment`` subclass from
``openenv.core.env_server.interfaces``, served by ``create_app`` (see ``serve_upstream.py``).

Behaviour (docs/protocol.md §10 T1/T2), so our client can meet every upstream quirk:

- ``reset(seed, episode_id, **kwargs)`` → ``echoed_message="ready"``, ``reward=0.0``, no metadata;
- ``step(message)`` → echo, ``reward=min(0.1·len, 1.0)``, metadata ``{"original_message","step"}``;
- ``step("boom")`` raises ``ValueError("kaboom")`` (an ``EXECUTION_ERROR`` frame upstream);
- ``step("bool")`` returns ``reward=True, done=True`` and empty metadata, so upstream sends the JSON
  boolean ``true`` and no top-level ``metadata`` key (docs/protocol.md §2.4, →B6);
- ``state`` carries one extra key, ``instances``: how many env instances this process has built,
  which lets a test prove that no session was opened behind its back.
"""

from __future__ import annotations

import itertools
import uuid
from typing import Any

from pydantic import Field

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State

__all__ = ["EchoAction", "EchoEnvironment", "EchoObservation"]

_instances = itertools.count(1)


class EchoAction(Action):
    """The message to echo back."""

    message: str = Field(..., min_length=1, description="Message to echo back")


class EchoObservation(Observation):
    """The echoed message and its length."""

    echoed_message: str = Field(default="", description="The echoed message")
    message_length: int = Field(default=0, description="Length of the echoed message")


class EchoEnvironment(Environment):
    """Echoes messages; isolated per instance, so it may serve concurrent sessions."""

    SUPPORTS_CONCURRENT_SESSIONS: bool = True

    def __init__(self) -> None:
        super().__init__()
        self._instances = next(_instances)
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0, instances=self._instances)

    def reset(
        self,
        seed: int | None = None,
        episode_id: str | None = None,
        **kwargs: Any,
    ) -> EchoObservation:
        self._state = State(
            episode_id=episode_id if episode_id is not None else str(uuid.uuid4()),
            step_count=0,
            instances=self._instances,
        )
        return EchoObservation(echoed_message="ready", message_length=0, reward=0.0)

    def step(self, action: EchoAction) -> EchoObservation:  # type: ignore[override]
        message = action.message
        if message == "boom":
            raise ValueError("kaboom")
        self._state.step_count += 1
        if message == "bool":
            return EchoObservation(echoed_message="b", message_length=1, reward=True, done=True)
        return EchoObservation(
            echoed_message=message,
            message_length=len(message),
            reward=min(len(message) * 0.1, 1.0),
            metadata={"original_message": message, "step": self._state.step_count},
        )

    @property
    def state(self) -> State:
        return self._state
