"""``MCPToolClient``: list and call an env's tools, against our servers and upstream's.

It is an ``EnvClient`` (reset/step/state over ``/ws``) that adds ``list_tools`` and ``call_tool``.
On connect it does what upstream 0.10's client does (docs/protocol.md §4.6): ``openenv/session/create`` over
``POST /mcp``, then ``/ws?session_id=<id>`` so both carriers share one server session. Then, unlike
upstream (docs/protocol.md §11 B3):

* it **verifies** the attach with a tunnelled ``openenv/session/create`` on the WebSocket; when the
  server ignored ``?session_id=`` (0.3.x servers create a new session) or cannot answer, it closes
  the HTTP session and uses the step path (``{"type":"call_tool"}``) on the WebSocket's own session;
  a server without ``POST /mcp`` gets the step path directly;
* ``list_tools`` **raises** ``ToolListError`` on failure instead of returning ``[]``;
* ``call_tool`` raises ``ToolCallFailed`` (with ``error_type``) for in-band and JSON-RPC errors.

``call_tool_step`` always goes through ``step``, so its ``StepResult`` carries the reward.

The Task API (``splits``, ``tasks``, ``num_tasks``, ``task``, as on ``EnvClient``) is read from the
server's MCP task resources (``resources/read`` over ``POST /mcp``, docs/protocol.md §13), which
need no session: listing tasks builds no env. A server without ``POST /mcp`` or without the
resources gets the ``/ws`` ``tasks`` frame instead.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx

from openenv.client import EnvClient, SyncEnvClient
from openenv.client_tasks import served_task
from openenv.errors import OpenEnvError, ProtocolError, SessionError, error_from_wire
from openenv.interfaces import ConnectOptions
from openenv.protocol import T_MCP
from openenv.tasks import Split, Task
from openenv.tools import CallToolObservation, ListToolsObservation, Tool, ToolError, ToolErrorType
from openenv.types import StepResult
from openenv.urls import http_base_url, is_loopback
from openenv_transport_mcp.jsonrpc import METHOD_NOT_FOUND
from openenv_transport_mcp.resources import TASKS_URI, split_uri, task_uri

__all__ = ["MCPToolClient", "McpSessionError", "SyncMCPToolClient", "ToolCallFailed", "ToolListError"]

log = logging.getLogger("openenv.transport.mcp.client")


class ToolCallFailed(OpenEnvError):
    """A tool call failed. ``tool_name`` and ``error_type`` (``tool_not_found``, ``invalid_args``,
    ``execution_error``, ``timeout``, … or ``None`` when the server did not say) tell why."""

    default_code = "TOOL_ERROR"

    def __init__(self, tool_name: str, message: str, error_type: str | None = None,
                 data: dict[str, Any] | None = None) -> None:
        self.tool_name, self.error_type = tool_name, error_type
        super().__init__(message, data={**(data or {}), "tool_name": tool_name, "error_type": error_type})

    def __str__(self) -> str:  # upstream's format, plus the error class when known
        suffix = f" (type: {self.error_type})" if self.error_type else ""
        return self.with_details(f"Tool '{self.tool_name}' failed: {self.message}{suffix}")


class ToolListError(OpenEnvError):
    """Listing the tools failed (upstream's client silently returned ``[]`` instead)."""

    default_code = "TOOL_ERROR"

    def __str__(self) -> str:
        return self.with_details(f"list_tools failed: {self.message}")


class McpSessionError(SessionError):
    """``openenv/session/create`` over ``POST /mcp`` failed (capacity, factory, auth …)."""

    def __str__(self) -> str:
        return self.with_details(f"Failed to create MCP session: {self.message}")


def mcp_url(base_url: str) -> str:
    """``POST /mcp`` URL of the env served at ``base_url`` (path prefix kept)."""
    return http_base_url(base_url) + "/mcp"


def _tool(entry: dict[str, Any]) -> Tool:
    schema = entry.get("input_schema", entry.get("inputSchema")) or {}
    return Tool(name=str(entry.get("name", "")), description=entry.get("description") or "", input_schema=schema)


def _tool_error(raw: Any) -> ToolError:
    try:
        return ToolError.model_validate(raw)
    except Exception:
        message = raw.get("message") if isinstance(raw, dict) else None
        return ToolError(error_type=ToolErrorType.EXECUTION_ERROR, message=str(message or raw))


def _result_value(result: Any) -> Any:
    return result["data"] if isinstance(result, dict) and "data" in result else result


class MCPToolClient(EnvClient[Any, Any]):
    """Async tool client for one server session (see the module docstring for the protocol)."""

    def __init__(self, base_url: str | None = None, **kwargs: Any) -> None:
        super().__init__(base_url, **kwargs)
        self._reset_mcp_state()

    def _reset_mcp_state(self) -> None:
        # ``new_session`` copies the instance dict; the owner mark lets a copy start afresh.
        self._mcp_owner = id(self)
        self._http: httpx.AsyncClient | None = None
        self._http_session_id: str | None = None
        self._path: str | None = None  # "jsonrpc" | "step" once connected
        self._tools_cache: list[Tool] | None = None
        self._rpc_id = 0

    @property
    def tool_path(self) -> str | None:
        """How tools are reached: ``"jsonrpc"`` (``POST /mcp``) or ``"step"``; ``None`` before connect."""
        return self._path

    @property
    def http_session_id(self) -> str | None:
        """The server session created over ``POST /mcp`` (shared with the WebSocket), if any."""
        return self._http_session_id

    # -- connection -----------------------------------------------------------------------------

    async def connect(self) -> MCPToolClient:
        if self._mcp_owner != id(self):
            self._reset_mcp_state()
        if self.connected and self._path is not None:
            return self
        await self._end_http_session()
        session_id = await self._create_http_session()
        options: ConnectOptions = self._options  # type: ignore[has-type]
        self._options = dataclasses.replace(options, session_id=session_id)
        try:
            await super().connect()
        except BaseException:
            await self._end_http_session()
            raise
        finally:
            self._options = options
        self._path = "step"
        if session_id is not None:
            if await self._attached_to(session_id):
                self._path = "jsonrpc"
            else:
                log.info("server at %s ignored the session attach; using the step path", self.base_url)
                await self._end_http_session()
        self._tools_cache = None
        return self

    async def _attached_to(self, session_id: str) -> bool:
        """Whether the WebSocket really serves ``session_id`` (a tunnelled session/create says)."""
        try:
            reply = await self._request({"type": T_MCP, "data": {
                "jsonrpc": "2.0", "method": "openenv/session/create", "params": {}, "id": self._next_id()}})
        except SessionError:
            raise
        except OpenEnvError:  # e.g. UNKNOWN_TYPE from a server without the tunnel
            return False
        data = reply.get("data") if reply.get("type") == T_MCP else None
        got = (data or {}).get("result", {}) if isinstance(data, dict) else {}
        return isinstance(got, dict) and got.get("session_id") == session_id

    async def close(self) -> None:
        """Detach the WebSocket, then close the HTTP-created session, then the HTTP client."""
        try:
            await super().close()
        finally:
            try:
                await self._end_http_session()
            finally:
                http, self._http = self._http, None
                if http is not None:
                    await http.aclose()
                self._path = None

    # -- JSON-RPC over HTTP ---------------------------------------------------------------------

    def _next_id(self) -> int:
        self._rpc_id += 1
        return self._rpc_id

    def _http_client(self) -> httpx.AsyncClient:
        if self._http is None:
            host = urlsplit(mcp_url(self.base_url)).hostname
            # Loopback servers are reached directly, never through a proxy from the environment.
            self._http = httpx.AsyncClient(headers=dict(self._options.headers), trust_env=not is_loopback(host))
        return self._http

    async def _rpc(self, method: str, params: dict[str, Any]) -> dict[str, Any] | None:
        """POST one JSON-RPC request; ``None`` when the server has no ``/mcp`` route."""
        body = {"jsonrpc": "2.0", "method": method, "params": params, "id": self._next_id()}
        response = await self._http_client().post(mcp_url(self.base_url), json=body,
                                                   timeout=self._options.message_timeout_s)
        if response.status_code in (404, 405):
            return None
        if response.status_code != 200:
            raise ProtocolError(f"POST {mcp_url(self.base_url)} answered HTTP {response.status_code}: "
                                f"{response.text[:200]}", data={"status": response.status_code})
        try:
            data = response.json()
        except ValueError as exc:
            raise ProtocolError(f"POST /mcp answered with invalid JSON: {exc}") from None
        if not isinstance(data, dict):
            raise ProtocolError(f"POST /mcp answered with a non-object: {data!r}")
        return data

    async def _create_http_session(self) -> str | None:
        data = await self._rpc("openenv/session/create", {})
        if data is None:
            return None
        if "error" in data:
            err = data.get("error") or {}
            detail = err.get("data") if isinstance(err.get("data"), dict) else {}
            raise McpSessionError(str(err.get("message", "unknown error")), data=detail)
        session_id = (data.get("result") or {}).get("session_id")
        if not session_id:
            raise McpSessionError("missing session_id")
        self._http_session_id = str(session_id)
        return self._http_session_id

    async def _end_http_session(self) -> None:
        session_id, self._http_session_id = self._http_session_id, None
        if session_id is None:
            return
        try:
            await self._rpc("openenv/session/close", {"session_id": session_id})
        except Exception:  # best effort: the server may be gone; its idle TTL reaps the session
            log.debug("closing HTTP session %s failed", session_id, exc_info=True)

    async def _ensure(self) -> None:
        if self._mcp_owner != id(self) or self._path is None:
            await self.connect()

    # -- tools ----------------------------------------------------------------------------------

    async def list_tools(self, use_cache: bool = True) -> list[Tool]:
        """The env's tools. Raises ``ToolListError`` when the server cannot list them."""
        if use_cache and self._tools_cache is not None:
            return self._tools_cache
        await self._ensure()
        if self._path == "jsonrpc":
            data = await self._rpc("tools/list", {"session_id": self._http_session_id})
            if data is None or "error" in data:
                err: dict[str, Any] = (data or {}).get("error") or {"message": "the server has no POST /mcp route"}
                raise ToolListError(str(err.get("message")), data={"error": err})
            tools = [_tool(t) for t in (data.get("result") or {}).get("tools", [])]
        else:
            obs = (await self.step({"type": "list_tools"})).observation
            if not isinstance(obs, ListToolsObservation):
                raise ToolListError(f"expected a tool list, got {obs!r}")
            if obs.metadata.get("error_type") == "list_tools_failed":
                raise ToolListError(str(obs.metadata.get("error")), data=dict(obs.metadata))
            tools = list(obs.tools)
        self._tools_cache = tools
        return tools

    async def get_tool(self, name: str) -> Tool | None:
        """The tool called ``name``, or ``None``."""
        return next((t for t in await self.list_tools() if t.name == name), None)

    async def has_tool(self, name: str) -> bool:
        return await self.get_tool(name) is not None

    async def call_tool(self, name: str, **arguments: Any) -> Any:
        """Call a tool and return its value (the result's ``data``). Raises ``ToolCallFailed``."""
        await self._ensure()
        if self._path == "jsonrpc":
            data = await self._rpc("tools/call", {"name": name, "arguments": arguments,
                                                  "session_id": self._http_session_id})
            if data is None:
                raise ToolCallFailed(name, "the server has no POST /mcp route", "transport_error")
            if "error" in data:
                err: dict[str, Any] = data.get("error") or {}
                raw = err.get("data")
                detail: dict[str, Any] = raw if isinstance(raw, dict) else {}
                raise ToolCallFailed(name, str(err.get("message", "unknown error")), detail.get("error_type"),
                                     data={"error": err})
            result = data.get("result")
            if isinstance(result, dict) and (result.get("is_error") or result.get("isError")):
                texts = [c.get("text", "") for c in result.get("content") or [] if isinstance(c, dict)]
                raise ToolCallFailed(name, " ".join(texts) or "the tool reported an error", "execution_error")
            return _result_value(result)
        step = await self.call_tool_step(name, **arguments)
        obs = step.observation
        if isinstance(obs, CallToolObservation):
            if obs.error is not None:
                raise ToolCallFailed(name, obs.error.message, str(obs.error.error_type))
            return _result_value(obs.result)
        return obs

    async def call_tool_step(self, name: str, **arguments: Any) -> StepResult[Any]:
        """Call a tool as a step: the ``StepResult`` carries reward and done; errors stay in-band."""
        return await self.step({"type": "call_tool", "tool_name": name, "arguments": arguments})

    # -- the Task API, from the MCP task resources --------------------------------------------

    async def _read_resource(self, uri: str) -> Any:
        """The JSON value of a task resource; ``None`` when the server serves no MCP resources.
        A JSON-RPC error becomes the OpenEnv error in its ``data`` (e.g. a ``ValidationError``
        with ``did_you_mean`` for an unknown split or task id)."""
        data = await self._rpc("resources/read", {"uri": uri})
        if data is None:
            return None
        if "error" in data:
            err: dict[str, Any] = data.get("error") or {}
            if err.get("code") == METHOD_NOT_FOUND:
                return None
            raw = err.get("data")
            detail: dict[str, Any] = raw if isinstance(raw, dict) else {}
            raise error_from_wire({"code": "VALIDATION_ERROR", **detail, "message": str(err.get("message", ""))})
        contents = (data.get("result") or {}).get("contents") or []
        text = contents[0].get("text") if contents and isinstance(contents[0], dict) else None
        if not isinstance(text, str):
            raise ProtocolError(f"resources/read {uri} answered without text contents: {data!r}")
        try:
            return json.loads(text)
        except ValueError as exc:
            raise ProtocolError(f"resources/read {uri} answered invalid JSON: {exc}") from None

    async def splits(self) -> list[Split]:
        got = await self._read_resource(TASKS_URI)
        if got is None:
            return await super().splits()
        return [Split.model_validate(s) for s in got["splits"]]

    async def tasks(self, split: str, start: int | None = None, stop: int | None = None) -> list[Task]:
        bounds = {k: v for k, v in (("start", start), ("stop", stop)) if v is not None}
        uri = split_uri(split) + (f"?{urlencode(bounds)}" if bounds else "")
        got = await self._read_resource(uri)
        if got is None:
            return await super().tasks(split, start, stop)
        return [served_task(t, split) for t in got["tasks"]]

    async def num_tasks(self, split: str) -> int:
        # A range that is empty on every split: the count without the listing.
        got = await self._read_resource(split_uri(split) + "?start=0&stop=0")
        if got is None:
            return await super().num_tasks(split)
        return int(got["num_tasks"])

    async def task(self, task_id: str) -> Task:
        got = await self._read_resource(task_uri(task_id))
        if got is None:
            return await super().task(task_id)
        return served_task(got["task"], None)

    # -- parsing (upstream-compatible observation types) ----------------------------------------

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[Any]:
        result = super()._parse_result(payload)
        obs = result.observation
        if isinstance(obs, dict):
            metadata: dict[str, Any] = obs.get("metadata") or {}
            if "tools" in obs:
                result.observation = ListToolsObservation(
                    tools=[_tool(t) for t in obs.get("tools") or []], reward=result.reward, done=result.done,
                    metadata=metadata)
            elif "tool_name" in obs:
                error = obs.get("error")
                result.observation = CallToolObservation(
                    tool_name=str(obs.get("tool_name", "")), result=obs.get("result"),
                    error=_tool_error(error) if error else None, reward=result.reward, done=result.done,
                    metadata=metadata)
        return result

    def sync(self) -> SyncMCPToolClient:
        return SyncMCPToolClient(self)


class SyncMCPToolClient(SyncEnvClient[Any, Any]):
    """Blocking twin of ``MCPToolClient``: ``SyncMCPToolClient("http://127.0.0.1:8000")``."""

    def __init__(self, client: MCPToolClient | str | None = None, **kwargs: Any) -> None:
        if not isinstance(client, MCPToolClient):
            client = MCPToolClient(client, **kwargs)
        super().__init__(client)

    @property
    def client(self) -> MCPToolClient:
        return self._client  # type: ignore[return-value]

    def list_tools(self, use_cache: bool = True) -> list[Tool]:
        return self._run(lambda: self.client.list_tools(use_cache))

    def call_tool(self, name: str, **arguments: Any) -> Any:
        return self._run(lambda: self.client.call_tool(name, **arguments))

    def call_tool_step(self, name: str, **arguments: Any) -> StepResult[Any]:
        return self._run(lambda: self.client.call_tool_step(name, **arguments))

    def get_tool(self, name: str) -> Tool | None:
        return self._run(lambda: self.client.get_tool(name))

    def has_tool(self, name: str) -> bool:
        return self._run(lambda: self.client.has_tool(name))
