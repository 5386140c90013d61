"""How an external turn-based harness is started (upstream's RFC 005 ``HarnessConfig``)."""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["HarnessConfig", "HarnessTransport"]


class HarnessTransport(str, Enum):
    """The channel a harness talks over: its stdio, Streamable HTTP, or MCP."""

    STDIO = "stdio"
    STREAMABLE_HTTP = "http"
    MCP = "mcp"


class HarnessConfig(BaseModel):
    """The facts an adapter needs to run one harness program (field names and defaults as upstream's).

    ``session_timeout_s`` bounds one turn (one ``step``), not the episode; ``startup_timeout_s``
    bounds how long the program may take to say it is ready. Unknown fields are refused, so a
    misspelt option fails when the config is built instead of being silently ignored.
    """

    model_config = ConfigDict(extra="forbid")

    name: str
    command: list[str]
    working_directory: str = "/workspace"
    env_vars: dict[str, str] = Field(default_factory=dict)
    transport: HarnessTransport = HarnessTransport.STDIO
    mcp_config_path: str | None = None
    startup_timeout_s: float = 30.0
    session_timeout_s: float = 600.0
    model: str | None = None
    api_key_env_var: str | None = None

    @field_validator("command")
    @classmethod
    def _non_empty(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("command must contain at least one element (the program to run)")
        return value
