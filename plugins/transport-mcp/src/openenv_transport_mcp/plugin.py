"""Plugin hooks of openenvkit-transport-mcp: registers the ``mcp`` transport (lazily).

Importing this module (as ``openenv plugins list`` does) imports neither FastMCP nor Starlette.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.hookspecs import hookimpl

if TYPE_CHECKING:
    from openenv.registry import TransportRegistry

__all__ = ["openenv_register_transports"]


@hookimpl
def openenv_register_transports(registry: TransportRegistry) -> None:
    """Register ``mcp``: ``/mcp`` (MCP Streamable HTTP, WebSocket, upstream's JSON-RPC dialect)."""
    registry.register(
        "mcp",
        server="openenv_transport_mcp.server:McpTransport",
        description="MCP on /mcp (Streamable HTTP and WebSocket; initialize, tools/list, tools/call) "
        "plus upstream's JSON-RPC dialect and the /ws type:\"mcp\" tunnel",
        # The tool client openenv.core.mcp_client adapts (the kernel never imports this package).
        tool_client="openenv_transport_mcp.client:MCPToolClient",
    )
