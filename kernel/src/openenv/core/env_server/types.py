"""``openenv.core.env_server.types``: upstream's data types, on top of the kernel's.

``Action``, ``Observation``, ``State`` and ``EnvironmentMetadata`` *are* the kernel's classes
(``openenv.types``), so a model written against upstream is a kernel model. Two deliberate
differences (see docs/coming-from-openenv.md):

* ``Observation.reward`` refuses booleans and non-finite floats when the observation is built
  (docs/protocol.md §11 B6); upstream accepts ``True`` and sends NaN as ``null``. Use ``1.0``/``0.0``.
* The kernel models do not set ``validate_assignment``: assigning a field after construction is
  not re-validated (upstream re-validates). A bad reward assigned late is still caught when the
  observation is sent (``EXECUTION_ERROR``: ``Non-finite reward`` / boolean reward).

The other classes here are upstream's request, response and configuration models. They are plain
declarations for code that imports or builds them; the server does not use them (its transports
have their own wire handling).
"""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from openenv.types import Action, EnvironmentMetadata, Observation, State

__all__ = [
    "Action",
    "BaseMessage",
    "CodeExecResult",
    "ConcurrencyConfig",
    "EnvironmentMetadata",
    "GetTaskRangeRequest",
    "GetTaskRequest",
    "HealthResponse",
    "HealthStatus",
    "ListTasksRequest",
    "NumTasksRequest",
    "Observation",
    "ResetRequest",
    "ResetResponse",
    "Scalar",
    "SchemaResponse",
    "ServerCapacityStatus",
    "ServerMode",
    "SessionInfo",
    "State",
    "StepRequest",
    "StepResponse",
    "WSCloseMessage",
    "WSErrorCode",
    "WSErrorResponse",
    "WSIncomingMessage",
    "WSObservationResponse",
    "WSResetMessage",
    "WSStateMessage",
    "WSStateResponse",
    "WSStepMessage",
]

Scalar = int | float | bool


class ServerMode(str, Enum):
    """Server mode: ``simulation`` (reset/step for training) or ``production``."""

    SIMULATION = "simulation"
    PRODUCTION = "production"


class HealthStatus(str, Enum):
    """Values of ``GET /health`` → ``status``."""

    HEALTHY = "healthy"
    UNHEALTHY = "unhealthy"
    DEGRADED = "degraded"


class WSErrorCode(str, Enum):
    """Error codes of ``/ws`` error frames (docs/protocol.md §3.6)."""

    INVALID_JSON = "INVALID_JSON"
    UNKNOWN_TYPE = "UNKNOWN_TYPE"
    VALIDATION_ERROR = "VALIDATION_ERROR"
    EXECUTION_ERROR = "EXECUTION_ERROR"
    CAPACITY_REACHED = "CAPACITY_REACHED"
    FACTORY_ERROR = "FACTORY_ERROR"
    SESSION_ERROR = "SESSION_ERROR"


class BaseMessage(BaseModel):
    """Base of upstream's strict message models (unknown keys refused)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class CodeExecResult(BaseMessage):
    """Output of running code: ``stdout``, ``stderr``, ``exit_code``."""

    stdout: str = Field(description="Standard output")
    stderr: str = Field(description="Standard error")
    exit_code: int = Field(description="Exit code")


class ResetRequest(BaseModel):
    """Body of ``POST /reset``: optional ``seed`` (≥ 0) and ``episode_id`` (≤ 255 chars), plus extras."""

    model_config = ConfigDict(extra="allow")

    seed: int | None = Field(default=None, ge=0)
    episode_id: str | None = Field(default=None, max_length=255)


class ResetResponse(BaseModel):
    """Body answered by ``POST /reset``."""

    model_config = ConfigDict(extra="forbid")

    observation: dict[str, Any]
    reward: float | None = None
    done: bool = False
    metadata: dict[str, Any] | None = None


class StepRequest(BaseModel):
    """Body of ``POST /step``: the ``action`` object, an optional ``timeout_s``, extras."""

    model_config = ConfigDict(extra="allow")

    action: dict[str, Any]
    timeout_s: float | None = Field(default=None, gt=0)
    request_id: str | None = Field(default=None, max_length=255)


class StepResponse(ResetResponse):
    """Body answered by ``POST /step``."""


class SchemaResponse(BaseMessage):
    """Body of ``GET /schema``."""

    action: dict[str, Any]
    observation: dict[str, Any]
    state: dict[str, Any]
    reset_observation: dict[str, Any] | None = None


class HealthResponse(BaseMessage):
    """Body of ``GET /health``."""

    status: HealthStatus = HealthStatus.HEALTHY


class ListTasksRequest(BaseMessage):
    split: str


class NumTasksRequest(BaseMessage):
    split: str


class GetTaskRequest(BaseMessage):
    split: str
    index: int


class GetTaskRangeRequest(BaseMessage):
    split: str
    start: int | None = None
    stop: int | None = None


class WSResetMessage(BaseMessage):
    type: Literal["reset"] = "reset"
    data: dict[str, Any] = Field(default_factory=dict)


class WSStepMessage(BaseMessage):
    type: Literal["step"] = "step"
    data: dict[str, Any]


class WSStateMessage(BaseMessage):
    type: Literal["state"] = "state"


class WSCloseMessage(BaseMessage):
    type: Literal["close"] = "close"


WSIncomingMessage = Annotated[
    WSResetMessage | WSStepMessage | WSStateMessage | WSCloseMessage, Field(discriminator="type")
]


class WSObservationResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["observation"] = "observation"
    data: dict[str, Any]


class WSStateResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["state"] = "state"
    data: dict[str, Any]


class WSErrorResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: Literal["error"] = "error"
    data: dict[str, Any]


class ConcurrencyConfig(BaseMessage):
    """Session settings for ``create_app(concurrency_config=...)``.

    ``max_concurrent_envs`` is the server's session capacity. ``session_timeout`` closes sessions
    that have no live connection after that many idle seconds; ``None`` keeps the kernel's default
    (300 s) instead of upstream's "never", since a session nobody can reach only holds a slot
    (docs/protocol.md §11 B16). A connected session is never reaped.
    """

    max_concurrent_envs: int = Field(default=1, ge=1)
    session_timeout: float | None = Field(default=None, gt=0)


class ServerCapacityStatus(BaseMessage):
    """Session counts: ``active_sessions`` out of ``max_sessions``."""

    active_sessions: int = Field(ge=0)
    max_sessions: int = Field(ge=1)

    @model_validator(mode="after")
    def _within_bounds(self) -> ServerCapacityStatus:
        if self.active_sessions > self.max_sessions:
            raise ValueError(
                f"active_sessions ({self.active_sessions}) cannot exceed max_sessions ({self.max_sessions})"
            )
        return self

    @property
    def available_slots(self) -> int:
        return self.max_sessions - self.active_sessions

    @property
    def is_at_capacity(self) -> bool:
        return self.available_slots == 0

    @classmethod
    def from_counts(cls, active: int, max_sessions: int) -> ServerCapacityStatus:
        return cls(active_sessions=active, max_sessions=max_sessions)


class SessionInfo(BaseMessage):
    """What upstream reports about one session."""

    session_id: str
    created_at: float
    last_activity_at: float
    step_count: int = Field(default=0, ge=0)
    environment_type: str
