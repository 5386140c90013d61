"""The adapter contract of a turn-based external harness and its errors (upstream's RFC 005 names)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from typing import ClassVar

from openenv.tools.wire import Tool

from .config import HarnessConfig
from .events import HarnessEvent, HarnessEventType, HarnessResponse

__all__ = ["AgenticHarnessAdapter", "HarnessError", "HarnessNotRunningError", "HarnessStartupError",
           "HarnessTurnTimeoutError"]


class HarnessError(Exception):
    """A harness failed (the base of the errors below)."""


class HarnessStartupError(HarnessError):
    """The harness program could not be started, or did not become ready in time."""


class HarnessNotRunningError(HarnessError):
    """Something needed a running harness and there was none."""


class HarnessTurnTimeoutError(HarnessError):
    """One turn ran past its time budget."""


class AgenticHarnessAdapter(ABC):
    """Runs one long-lived harness program and talks to it turn by turn.

    The program keeps its own conversation between turns; ``send_message_streaming`` is one turn
    (the harness runs its own agent loop, calling models and tools, until it answers). An adapter
    owns exactly one program at a time, so an env factory builds a fresh adapter per env.
    ``BUILTIN_TOOL_NAMES`` are the harness's own tools: env tools with those names are renamed
    before injection (``resolve_tool_conflicts``).
    """

    BUILTIN_TOOL_NAMES: ClassVar[frozenset[str]] = frozenset()

    def __init__(self, config: HarnessConfig) -> None:
        self.config = config

    @abstractmethod
    async def start(self, working_directory: str) -> None:
        """Start the program in ``working_directory``; ``HarnessStartupError`` if it does not come up."""

    @abstractmethod
    async def stop(self) -> None:
        """Stop the program and free what it held. Idempotent: stopping twice, or never started, is fine."""

    @abstractmethod
    async def inject_tools(self, tools: list[Tool], bridge_url: str | None = None) -> None:
        """Tell the harness about the env's tools (called before ``start``); ``bridge_url`` is the
        MCP endpoint that serves them, when there is one."""

    @abstractmethod
    def send_message_streaming(self, message: str) -> AsyncIterator[HarnessEvent]:
        """One turn: yield its events as they happen; the last one is ``TURN_COMPLETE`` with
        ``data.response`` (and optionally ``data.done``)."""

    @abstractmethod
    async def is_alive(self) -> bool:
        """Whether the program is still running."""

    async def send_message(self, message: str) -> HarnessResponse:
        """One turn, collected: every event, then the response of its ``TURN_COMPLETE``.

        Raises ``HarnessError`` when the stream ends on anything else (the harness broke off).
        """
        events = [event async for event in self.send_message_streaming(message)]
        if not events or events[-1].type is not HarnessEventType.TURN_COMPLETE:
            raise HarnessError("harness event stream ended without a TURN_COMPLETE event")
        last = events[-1].data
        return HarnessResponse(response=str(last.get("response", "")), events=events,
                               done=bool(last.get("done", False)))
