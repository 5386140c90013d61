"""Plugin hooks of openenvkit-env-echo-mcp: registers ``echo_mcp`` (lazily)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.hookspecs import hookimpl

if TYPE_CHECKING:
    from openenv.registry import EnvRegistry

__all__ = ["openenv_register_envs"]


@hookimpl
def openenv_register_envs(registry: EnvRegistry) -> None:
    registry.register(
        "echo_mcp", "openenv_env_echo_mcp.env:EchoMcpEnv",
        description="Echo tools over MCP: echo_message and echo_with_length.",
        manifest="openenv_env_echo_mcp:openenv.yaml",
    )
