"""The MCP echo environment.

Promises (upstream's MCP echo env, docs/protocol.md §10 T4–T7): tools ``echo_message(message) -> message`` and
``echo_with_length(message) -> {"message", "length"}``; ``reset`` returns an observation with
``metadata = {"status": "ready", "message": "Echo environment ready!"}`` and reward 0.0; every step
(tool calls included) counts in ``state.step_count``; tool calls carry no reward. Instances share
nothing, so one server holds many sessions.
"""

from __future__ import annotations

from typing import Any

from openenv.tools import ToolEnvironment, tool
from openenv.types import EnvironmentMetadata, Observation

__all__ = ["EchoMcpEnv"]


class EchoMcpEnv(ToolEnvironment):
    """Echoes messages through two tools."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    # Tool bodies are trivial; only the deadline machinery needs a worker, and steps are cheap.
    BLOCKING = False

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Observation:
        super().reset(seed=seed, episode_id=episode_id)
        return Observation(done=False, reward=0.0,
                           metadata={"status": "ready", "message": "Echo environment ready!"})

    @tool
    def echo_message(self, message: str) -> str:
        """Echo back the provided message.

        Args:
            message: The message to echo back.
        """
        return message

    @tool
    def echo_with_length(self, message: str) -> dict[str, Any]:
        """Echo back the message with its length.

        Args:
            message: The message to echo back.
        """
        return {"message": message, "length": len(message)}

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="echo_mcp",
            description="Echo environment with MCP tools: echo_message and echo_with_length.",
            version="0.1.0",
        )
