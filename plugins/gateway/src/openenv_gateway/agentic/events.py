"""What one harness turn produces: events, the turn's response, and the client frame of ``/harness``."""

from __future__ import annotations

import time
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel, Field

__all__ = ["HarnessClientMessage", "HarnessEvent", "HarnessEventType", "HarnessResponse", "events_to_metadata"]


class HarnessEventType(str, Enum):
    """The kinds of event a turn emits; every turn ends with ``TURN_COMPLETE``."""

    LLM_REQUEST = "llm_request"
    LLM_RESPONSE = "llm_response"
    LLM_CHUNK = "llm_chunk"
    TOOL_CALL = "tool_call"
    TOOL_RESULT = "tool_result"
    TEXT_OUTPUT = "text_output"
    ERROR = "error"
    TURN_COMPLETE = "turn_complete"


class HarnessEvent(BaseModel):
    """One event of a turn. ``data`` depends on ``type``: ``tool_call`` has ``tool_name`` and
    ``arguments``, ``text_output`` has ``text``, ``error`` has ``message`` and ``recoverable``,
    ``turn_complete`` has ``response`` and may have ``done`` (see upstream's RFC 005)."""

    type: HarnessEventType
    timestamp: float = Field(default_factory=time.time)
    data: dict[str, Any] = Field(default_factory=dict)


class HarnessResponse(BaseModel):
    """A finished turn: the harness's text, every event of the turn, and whether it says it is done."""

    response: str
    events: list[HarnessEvent] = Field(default_factory=list)
    done: bool = False


class HarnessClientMessage(BaseModel):
    """The one frame a client sends on ``/harness``: ``{"type": "message", "content": "..."}``."""

    type: Literal["message"]
    content: str


def events_to_metadata(events: list[HarnessEvent]) -> list[dict[str, Any]]:
    """The events as plain JSON data, fit for an observation's ``metadata`` (enums become strings)."""
    return [event.model_dump(mode="json") for event in events]
