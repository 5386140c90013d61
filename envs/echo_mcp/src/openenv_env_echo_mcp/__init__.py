"""The MCP echo environment (``echo_mcp``): upstream's echo tools on a ``ToolEnvironment``.

Nothing is imported here so that loading the plugin stays cheap; the env is
``openenv_env_echo_mcp.env:EchoMcpEnv``.
"""

from __future__ import annotations

__all__: list[str] = []
