"""A small typed echo env for transport and server tests (what the transport contract serves).

``EchoEnv`` echoes ``EchoAction.message`` back with reward ``0.1 * len(message)``; a few messages
pick a failure mode, so a test can reach every error path of a server:

* ``boom`` – ``step`` raises ``ValueError("kaboom")`` (an ``EXECUTION_ERROR`` for the client);
* ``slow`` – ``step`` waits until ``EchoEnv.RELEASE`` is set, at most ``EchoEnv.slow_s`` seconds;
* ``nan`` – returns a NaN reward (bypassing validation, as a buggy env could);
* ``bool`` – builds an observation with a boolean reward (which validation refuses);
* ``break_state`` / ``break_close`` – later ``state`` / ``close`` calls raise.

``reset(fail="why")`` raises ``RuntimeError("why")``. ``step`` takes the keyword arguments
``timeout_s`` and ``note`` (and no others), echoed in the observation's metadata when given. A
subclass with ``RECORD_CALLS = True`` keeps in its state what reached the env instead: the
``seed`` of the last ``reset`` and the ``last_timeout_s`` of the last ``step``.

``EchoEnv.live`` holds the instances not closed yet, ``EchoEnv.created`` counts instances and
``EchoEnv.closed`` lists the episode ids of closed ones, so tests can prove that nothing leaks;
``EchoEnv.clear()`` resets the records. ``slow_s`` and ``created`` are read from the subclass, so
a subclass may set its own.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any, ClassVar

from pydantic import Field

from openenv.env import Environment
from openenv.types import Action, Observation, State

__all__ = ["EchoAction", "EchoEnv", "EchoObservation"]


class EchoAction(Action):
    """The message to echo (at least one character)."""

    message: str = Field(min_length=1, description="Text to echo")


class EchoObservation(Observation):
    """The echoed message and its length."""

    echoed_message: str = ""
    message_length: int = 0


class EchoEnv(Environment[EchoAction, EchoObservation, State]):
    """Typed echo with failure modes chosen by the message (see the module docs)."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    RELEASE: ClassVar[threading.Event] = threading.Event()
    slow_s: ClassVar[float] = 10.0
    lock: ClassVar[threading.Lock] = threading.Lock()
    live: ClassVar[set[EchoEnv]] = set()
    closed: ClassVar[list[str]] = []
    created: ClassVar[int] = 0
    RECORD_CALLS: ClassVar[bool] = False

    def __init__(self) -> None:
        super().__init__()
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)
        self._broken_state = False
        self._broken_close = False
        with EchoEnv.lock:
            EchoEnv.live.add(self)
            type(self).created += 1

    @classmethod
    def clear(cls) -> None:
        """Forget every record and re-arm ``RELEASE``."""
        with cls.lock:
            cls.live.clear()
            cls.closed.clear()
            cls.created = 0
        cls.RELEASE.clear()

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> EchoObservation:
        if kwargs.get("fail"):
            raise RuntimeError(kwargs["fail"])
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        if self.RECORD_CALLS:
            self._state.seed = seed  # type: ignore[attr-defined]  # State keeps extra keys
        return EchoObservation(echoed_message="ready", message_length=0, reward=0.0)

    def step(  # type: ignore[override]  # takes only the step arguments it declares
        self, action: EchoAction, timeout_s: float | None = None, note: str | None = None
    ) -> EchoObservation:
        msg = action.message
        if msg == "boom":
            raise ValueError("kaboom")
        if msg == "slow":
            EchoEnv.RELEASE.wait(type(self).slow_s)
        if msg == "break_state":
            self._broken_state = True
        if msg == "break_close":
            self._broken_close = True
        self._state.step_count += 1
        metadata: dict[str, Any] = {"original_message": msg, "step": self._state.step_count}
        if self.RECORD_CALLS:
            self._state.last_timeout_s = timeout_s  # type: ignore[attr-defined]
        elif timeout_s is not None:
            metadata["timeout_s"] = timeout_s
        if note is not None:
            metadata["note"] = note
        if msg == "nan":
            return EchoObservation.model_construct(echoed_message=msg, message_length=len(msg),
                                                   reward=float("nan"), done=False, metadata=metadata)
        if msg == "bool":
            return EchoObservation(echoed_message="b", message_length=1, reward=True, done=True)
        return EchoObservation(echoed_message=msg, message_length=len(msg), reward=0.1 * len(msg),
                               metadata=metadata)

    @property
    def state(self) -> State:
        if self._broken_state:
            raise KeyError("x")
        return self._state

    def close(self) -> None:
        with EchoEnv.lock:
            EchoEnv.live.discard(self)
            EchoEnv.closed.append(self._state.episode_id or "")
        if self._broken_close:
            raise RuntimeError("close failed")
