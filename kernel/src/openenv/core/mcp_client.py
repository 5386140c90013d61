"""``openenv.core.mcp_client``: upstream's ``MCPToolClient`` / ``MCPClientBase``.

The client itself is the MCP transport plugin's (``openenv_transport_mcp.client.MCPToolClient``:
``list_tools``, ``call_tool``, ``get_tool``, ``has_tool``, the ``POST /mcp`` + ``/ws`` session attach
of docs/protocol.md §4.6, with the fixes of §11 B3), given upstream's constructor and sync/async dispatch by
the same mixin as ``openenv.core.EnvClient``. Its ``.sync()`` turns ``list_tools``/``call_tool`` into
blocking calls. Differences from upstream: ``list_tools`` raises instead of returning ``[]`` on
failure, and ``call_tool`` raises ``ToolCallFailed`` (whose ``str()`` keeps upstream's
``Tool '<name>' failed: <message>``) with the error class in ``error_type``.

Needs the plugin: ``pip install openenv-transport-mcp``.
"""

from __future__ import annotations

from typing import Any

from openenv.core.env_client import UpstreamClientMixin

try:
    from openenv_transport_mcp.client import MCPToolClient as _PluginMCPToolClient
    from openenv_transport_mcp.client import ToolCallFailed, ToolListError
except ImportError as exc:  # pragma: no cover - exercised only without the plugin
    raise ImportError(
        "openenv.core.mcp_client needs the MCP transport plugin, which provides the tool client: "
        "`pip install openenv-transport-mcp`."
    ) from exc

__all__ = ["MCPClientBase", "MCPToolClient", "ToolCallFailed", "ToolListError"]


class MCPToolClient(UpstreamClientMixin, _PluginMCPToolClient):  # type: ignore[misc]
    """``async with MCPToolClient(base_url=url) as env: await env.call_tool("echo", message="hi")``.

    The constructor takes upstream's ``MCPToolClient`` arguments in upstream's order (which differs
    from ``EnvClient``'s: ``max_message_size_mb`` comes after ``mode``). As upstream, ``mode``
    defaults to ``"production"`` and nothing else is accepted.
    """

    def __init__(
        self,
        base_url: str | None = None,
        connect_timeout_s: float = 10.0,
        message_timeout_s: float = 60.0,
        websocket_ping_interval_s: float | None = 20.0,
        websocket_ping_timeout_s: float | None = 20.0,
        provider: Any = None,
        mode: str | None = None,
        max_message_size_mb: float = 100.0,
        headers: dict[str, str] | None = None,
        **kernel_options: Any,
    ) -> None:
        mode = mode or "production"
        if mode.lower() != "production":
            raise ValueError(
                f"MCPToolClient only supports 'production' mode, got '{mode}'. Use GenericEnvClient (or "
                "your env's EnvClient) for simulation-mode reset/step."
            )
        super().__init__(
            base_url,
            connect_timeout_s=connect_timeout_s,
            message_timeout_s=message_timeout_s,
            max_message_size_mb=max_message_size_mb,
            websocket_ping_interval_s=websocket_ping_interval_s,
            websocket_ping_timeout_s=websocket_ping_timeout_s,
            provider=provider,
            mode=mode,
            headers=headers,
            **kernel_options,
        )


#: Upstream's base class of tool clients; here the same class.
MCPClientBase = MCPToolClient
