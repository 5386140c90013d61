"""An episode's env tools as a real MCP server on the gateway: ``/v1/openenv/mcp`` (Streamable HTTP).

Agent programs that take an MCP server (Claude Code, Codex, any client of the official ``mcp`` SDK)
get the episode's tools here, with the episode's key as the bearer token — the same key that is
their model API key. The protocol is the ``mcp`` SDK's own server (the initialize handshake of
2024-11-05 to 2025-11-25 and the per-request envelope of later revisions, JSON replies, no server
state between requests), so nothing of MCP is re-implemented here: this module only maps the SDK's
``tools/list`` and ``tools/call`` onto the episode's tool handler (the JSON-RPC callable that
``CaptureGateway.open_episode(tools=...)`` was given, e.g. a ``SessionMCPBridge``).

A request without a live episode's key is refused with 401 before it reaches the SDK; one
episode's key never reaches another's tools; calls of one episode run one at a time (an env
session is not built for concurrent steps) — a second call in flight gets a tool error saying so.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    from starlette.types import Receive, Scope, Send

__all__ = ["MCP_PATH", "EpisodeToolsMCP"]

#: Where the gateway serves the episode's tools over MCP (relative to its base URL).
MCP_PATH = "/v1/openenv/mcp"
#: The ASGI scope key under which the authenticated episode reaches the SDK's handlers.
_SCOPE_KEY = "openenv.episode"

EpisodeOf = Callable[[Any], Any]  # a Starlette Request -> the _Episode (raises GatewayError)


class EpisodeToolsMCP:
    """The ASGI app behind ``MCP_PATH``. ``episode_of(request)`` authenticates (the gateway's own
    key check); ``lifespan()`` must wrap the serving (the SDK's session manager runs in it)."""

    def __init__(self, episode_of: EpisodeOf, refuse: Callable[[Exception], Any], *,
                 max_body_bytes: int) -> None:
        from mcp.server.lowlevel import Server
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
        from mcp.server.transport_security import TransportSecuritySettings

        self._episode_of, self._refuse = episode_of, refuse
        self._ids = itertools.count(1)
        self.server: Any = Server("openenv-episode-tools", version="0.1.0",
                                  instructions="The tools of the environment episode this key belongs to.",
                                  on_list_tools=self._list_tools, on_call_tool=self._call_tool)
        # Loopback only (the gateway binds 127.0.0.1): the SDK's DNS-rebinding check keeps a web page
        # in the agent's browser from reaching the tools through a hostile host name.
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*"])
        # A session manager runs once: each start of the gateway (lifespan) makes its own.
        self._new_manager = lambda: StreamableHTTPSessionManager(
            app=self.server, json_response=True, stateless=True, security_settings=security,
            max_request_body_size=max_body_bytes)
        self.manager: Any = None

    @contextlib.asynccontextmanager
    async def lifespan(self, _app: Any) -> AsyncIterator[None]:
        manager = self._new_manager()
        async with manager.run():
            self.manager = manager
            try:
                yield
            finally:
                self.manager = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        from starlette.requests import Request

        request = Request(scope, receive)
        try:
            episode = self._episode_of(request)
        except Exception as exc:  # GatewayError: the gateway's own 401 body
            await self._refuse(exc)(scope, receive, send)
            return
        manager = self.manager
        if manager is None:  # an app served without its lifespan (uvicorn lifespan="off")
            raise RuntimeError("the MCP tools route needs the gateway app's lifespan to run")
        scope.setdefault("state", {})[_SCOPE_KEY] = episode
        await manager.handle_request(scope, receive, send)

    # -- the SDK's handlers -------------------------------------------------------------------------

    @staticmethod
    def _episode(ctx: Any) -> Any:
        request = getattr(ctx, "request", None)
        episode = request.scope.get("state", {}).get(_SCOPE_KEY) if request is not None else None
        if episode is None:  # only reachable through __call__, which always sets it
            raise RuntimeError("no episode on this MCP request")
        return episode

    async def _ask(self, episode: Any, method: str, params: dict[str, Any]) -> dict[str, Any]:
        """One JSON-RPC request to the episode's tool handler (in a thread: it steps the env)."""
        from mcp.shared.exceptions import MCPError

        handler = episode.tools
        if handler is None:  # an episode opened without tools: an empty list, and calls refused
            if method == "tools/list":
                return {"tools": []}
            raise MCPError(-32601, "this episode has no tools: the harness opened it without any")
        with episode.lock:
            if episode.tool_busy:
                raise MCPError(-32000, "this episode already has a tool call in flight: wait for its answer")
            episode.tool_busy = True
        try:
            reply = await anyio.to_thread.run_sync(
                handler, {"jsonrpc": "2.0", "id": next(self._ids), "method": method, "params": params})
        finally:
            with episode.lock:
                episode.tool_busy = False
        if not isinstance(reply, dict):
            raise MCPError(-32603, f"the episode's tool handler answered {type(reply).__name__}, not a JSON-RPC reply")
        if "error" in reply:
            error = reply["error"] if isinstance(reply["error"], dict) else {}
            raise MCPError(int(error.get("code", -32603)), str(error.get("message", "tool handler error")))
        result = reply.get("result")
        return result if isinstance(result, dict) else {}

    async def _list_tools(self, ctx: Any, _params: Any) -> Any:
        from mcp import types

        result = await self._ask(self._episode(ctx), "tools/list", {})
        tools = []
        for tool in result.get("tools", []):
            schema = tool.get("inputSchema") or tool.get("input_schema") or {"type": "object"}
            tools.append(types.Tool(name=str(tool["name"]), description=str(tool.get("description") or ""),
                                    input_schema=schema))
        return types.ListToolsResult(tools=tools)

    async def _call_tool(self, ctx: Any, params: Any) -> Any:
        from mcp import types
        from mcp.shared.exceptions import MCPError

        try:
            result = await self._ask(self._episode(ctx), "tools/call",
                                     {"name": params.name, "arguments": dict(params.arguments or {})})
        except MCPError as exc:
            # Unknown tool, bad arguments, a call in flight, the env failing: a tool error the model
            # reads (MCP's isError result), not a protocol failure that ends the agent's client.
            return types.CallToolResult(content=[types.TextContent(type="text", text=exc.message)], is_error=True)
        return _as_call_result(result)


def _as_call_result(result: dict[str, Any]) -> Any:
    """A tool handler's result as MCP's ``CallToolResult``: an MCP-shaped result (``content``) is
    passed on; the kernel bridge's ``{data, done, metadata, error}`` becomes text plus structured
    content."""
    from mcp import types

    if isinstance(result.get("content"), list):
        return types.CallToolResult.model_validate(result)
    data, error = result.get("data"), result.get("error")
    if error:
        message = error.get("message", error) if isinstance(error, dict) else error
        return types.CallToolResult(content=[types.TextContent(type="text", text=str(message))], is_error=True)
    text = data if isinstance(data, str) else json.dumps(data, default=str)
    structured = {k: result[k] for k in ("data", "done", "metadata") if k in result}
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                structured_content=json.loads(json.dumps(structured, default=str)))
