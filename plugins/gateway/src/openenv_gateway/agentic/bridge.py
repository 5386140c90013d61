"""The env's FastMCP tools for a harness program, over loopback Streamable HTTP (RFC 005's bridge).

The bridge serves only the tools: the harness can call the env's domain tools, never the
orchestration (``reset``/``step``/``state``), which lives on another server. It binds 127.0.0.1 on
a free port, in a background thread with its own event loop, and ``stop`` frees both.
"""

from __future__ import annotations

from typing import Any

from openenv_gateway.serving import ThreadServer

from .adapter import HarnessError

__all__ = ["HarnessMCPBridge", "build_bridge_server", "fastmcp_tools"]


async def fastmcp_tools(server: Any) -> dict[str, Any]:
    """A FastMCP server's tools by name (FastMCP 2's ``get_tools``, 3's ``list_tools``)."""
    getter = getattr(server, "get_tools", None)
    if callable(getter):
        found = await getter()
        if isinstance(found, dict):
            return found
    return {tool.name: tool for tool in await server.list_tools()}


async def build_bridge_server(mcp_server: Any, renames: dict[str, str]) -> Any:
    """A FastMCP server that answers to the names the harness was given.

    ``renames`` maps an injected name to the env's own name (``{"env_read": "read"}``). Without
    renames this is ``mcp_server`` itself; with them, a new server holding every tool of
    ``mcp_server``, the renamed ones under their new names, so a renamed tool stays callable.
    ``HarnessError`` if a rename names a tool the server does not have.
    """
    if not renames:
        return mcp_server
    from fastmcp import FastMCP

    tools = await fastmcp_tools(mcp_server)
    unknown = sorted(set(renames.values()) - set(tools))
    if unknown:
        raise HarnessError("Cannot rename tools that the MCP server does not expose: " + ", ".join(unknown))
    new_name = {old: new for new, old in renames.items()}
    view = FastMCP(f"{getattr(mcp_server, 'name', 'openenv')}-harness-view")
    for name, tool in tools.items():
        served = new_name.get(name, name)
        view.add_tool(tool if served == name else tool.model_copy(update={"name": served}))
    return view


class HarnessMCPBridge:
    """``start()`` serves ``mcp_server`` at ``http://127.0.0.1:<port>/mcp`` and returns that URL;
    ``stop()`` ends it (both idempotent)."""

    def __init__(self, mcp_server: Any, host: str = "127.0.0.1") -> None:
        if host != "127.0.0.1":
            # The bridge carries an env's tools unauthenticated: it is for the harness next to it only.
            raise ValueError(f"the harness tool bridge binds 127.0.0.1 only, got host={host!r}")
        self._mcp_server = mcp_server
        self._server: ThreadServer | None = None
        self._url: str | None = None

    @property
    def url(self) -> str | None:
        """The MCP endpoint while running, else ``None``."""
        return self._url

    def start(self, timeout_s: float = 10.0) -> str:
        if self._url is not None:
            return self._url
        server = ThreadServer(self._mcp_server.http_app(), lifespan="on")
        try:
            base = server.start(ready_timeout_s=timeout_s)
        except Exception as exc:
            server.stop()
            raise HarnessError(f"MCP bridge failed to start: {exc}") from exc
        self._server = server
        self._url = base + "/mcp"
        return self._url

    def stop(self, timeout_s: float = 5.0) -> None:
        server, self._server, self._url = self._server, None, None
        if server is not None:
            server.stop()
