"""Request and response bodies of the HTTP transport, as Pydantic models.

The request models validate bodies exactly as upstream OpenEnv 0.10 does (docs/protocol.md §5.4, §5.5): extra
keys are allowed (they become keyword arguments of ``reset``/``step``), ``seed`` must be ``≥ 0``,
``episode_id`` and ``request_id`` at most 255 characters, ``timeout_s`` positive. The response
models exist only to describe the bodies in the OpenAPI document; responses are built as dicts.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ONE_SHOT_HEADER",
    "SESSION_HEADER",
    "ErrorResponse",
    "ObservationResponse",
    "ResetRequest",
    "SessionClosed",
    "SessionCreated",
    "SessionInfo",
    "StepRequest",
    "ValidationErrorItem",
    "ValidationErrorResponse",
]

#: Request header naming the session a control request acts on (docs/protocol.md §11 B1).
SESSION_HEADER = "OpenEnv-Session-Id"
#: Response header marking a one-shot reply (a transient env built and closed for the request).
ONE_SHOT_HEADER = "OpenEnv-Session"


class ResetRequest(BaseModel):
    """Body of ``POST /reset``; optional (a missing or empty body means ``{}``)."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={"examples": [{"seed": 42, "episode_id": "episode-001"}, {}]},
    )

    seed: int | None = Field(default=None, ge=0, description="Random seed for a reproducible episode")
    episode_id: str | None = Field(default=None, max_length=255, description="Identifier for the new episode")


class StepRequest(BaseModel):
    """Body of ``POST /step``. Extra keys are passed to ``env.step`` if its signature takes them."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={"examples": [{"action": {"message": "Hello"}, "timeout_s": 30.0}]},
    )

    action: dict[str, Any] = Field(description="The action; validated against the env's action schema")
    timeout_s: float | None = Field(default=None, gt=0, description="Timeout for this step, in seconds")
    request_id: str | None = Field(default=None, max_length=255, description="Caller's request identifier")


class ObservationResponse(BaseModel):
    """Reply of ``POST /reset`` and ``POST /step`` (docs/protocol.md §2.4, HTTP column)."""

    observation: dict[str, Any] = Field(
        description="Every observation field except reward and done; `metadata` always present"
    )
    reward: float | None = Field(default=None, description="Reward as a float, or null")
    done: bool = Field(default=False, description="Whether the episode has terminated")
    metadata: dict[str, Any] | None = Field(
        default=None, description="Copy of the observation metadata; null when empty"
    )


class SessionCreated(BaseModel):
    """Reply of ``POST /sessions``."""

    session_id: str = Field(description=f"Send it back in the `{SESSION_HEADER}` request header")


class SessionClosed(BaseModel):
    """Reply of ``DELETE /sessions/{session_id}``."""

    session_id: str
    closed: bool = Field(description="True when the env was closed and the slot freed now")
    closing: bool | None = Field(
        default=None, description="True when a WebSocket is attached; the session ends when it detaches"
    )


class SessionInfo(BaseModel):
    """Reply of ``GET /sessions/{session_id}``."""

    session_id: str
    created_at: float = Field(description="Creation time, seconds since the epoch")
    idle_s: float = Field(description="Seconds since the last request on this session")
    connections: int = Field(description="Live connections (WebSockets) attached to the session")
    step_count: int = Field(description="Steps since the last reset, as counted by the server")
    transport: str = Field(description="Transport that created the session")
    idle_timeout_s: float | None = Field(
        default=None, description="Idle time after which a session with no connection is closed"
    )


class ErrorResponse(BaseModel):
    """Body of every non-validation error this transport returns (always JSON)."""

    model_config = ConfigDict(extra="allow")

    detail: str = Field(description="What went wrong")
    code: str | None = Field(
        default=None,
        description="OpenEnv error code: CAPACITY_REACHED, FACTORY_ERROR, EXECUTION_ERROR, ...",
    )


class ValidationErrorItem(BaseModel):
    """One Pydantic-style validation error."""

    model_config = ConfigDict(extra="allow")

    type: str
    loc: list[str | int]
    msg: str
    input: Any = None
    ctx: dict[str, Any] | None = None


class ValidationErrorResponse(BaseModel):
    """422 body: ``loc`` starts at ``"body"`` for body errors and is relative to the action for
    action errors (``["message"]``), as upstream returns them."""

    detail: list[ValidationErrorItem]
