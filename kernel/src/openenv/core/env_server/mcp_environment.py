"""``openenv.core.env_server.mcp_environment``: upstream's ``MCPEnvironment`` on the kernel's tool envs.

``MCPEnvironment(mcp_server)`` takes a FastMCP server, as upstream's does, and registers each of its
function tools (``@mcp.tool``) in the kernel's tool registry (``openenv.tools.ToolEnvironment``).
From then on the kernel serves them: ``ListToolsAction`` / ``CallToolAction`` on the step path,
JSON-RPC ``tools/list`` / ``tools/call`` through the MCP transport, one registry for both.
FastMCP is only touched here, when an env is built (the kernel never imports it).

Kept from upstream: reserved tool names (``reset``, ``step``, ``state``, ``close``) are refused at
construction with ``MCP tools cannot use reserved names: [...]`` (a ``ValueError``);
``self.tool(mode=...)`` registers mode-specific tools; non-MCP actions go to ``_step_impl``; a tool
call's default deadline is 30 s.

Better than upstream (docs/protocol.md §11): mode-specific tools are visible and callable in the server's mode
(B5) and get full JSON Schemas with argument validation and the deadline (B8); tool failures are
classified by where they happened, not by message text (B7).

Not supported: ``execute_code`` (code mode ran agent code in the server process, B13),
``mcp_session()`` and the in-process FastMCP ``mcp_client`` (``mcp_client`` is ``None``). Refused at
construction: tools without a Python function behind them (proxies, mounted servers) and tools
that take FastMCP's ``Context``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, ClassVar

from openenv.core._unsupported import refuse
from openenv.core.env_server.interfaces import Environment as _CompatEnvironment
from openenv.core.utils import run_async_safely
from openenv.errors import RuleViolation
from openenv.modes import Mode
from openenv.tools import RESERVED_TOOL_NAMES, CallToolObservation, ToolEnvironment, ToolRegistry
from openenv.types import Action, Observation

__all__ = ["MCP_TOOL_CALL_TIMEOUT", "MCPEnvironment", "ReservedToolNameError", "get_server_tools"]

#: Default deadline of a tool call, in seconds (upstream's).
MCP_TOOL_CALL_TIMEOUT = 30.0


class ReservedToolNameError(RuleViolation, ValueError):
    """A tool is named after a control operation. A ``ValueError`` as upstream, and a ``RuleViolation``."""


def _resolve(value: Any) -> Any:
    """The value of a (FastMCP) coroutine from synchronous code; other values as they are."""
    if inspect.iscoroutine(value):
        return run_async_safely(value)
    if inspect.isawaitable(value):

        async def wait() -> Any:
            return await value

        return run_async_safely(wait())
    return value


def get_server_tools(mcp_server: Any) -> dict[str, Any]:
    """The tools of a FastMCP server by name (FastMCP 2's ``get_tools`` or 3+'s ``list_tools``)."""
    getter = getattr(mcp_server, "get_tools", None)
    if callable(getter):
        result = getter()
        result = _resolve(result)
        if isinstance(result, dict):
            return result
    lister = getattr(mcp_server, "list_tools", None)
    if callable(lister):
        result = _resolve(lister())
        return {tool.name: tool for tool in result}
    raise TypeError(
        f"MCPEnvironment needs a FastMCP server (with list_tools() or get_tools()), got "
        f"{type(mcp_server).__name__}."
    )


def mcp_result_object(result: Any) -> Any:
    """A tool result as upstream's ``CallToolObservation.result``: FastMCP's ``CallToolResult``
    (``.content``, ``.structured_content``, ``.data``, ``.is_error``, ``.meta``), built from the
    kernel's result mapping. The object also reads as that mapping (``result["data"]``,
    ``dict(result)``), which is what the kernel's transports send, so the wire is unchanged."""
    keys = {"content", "structured_content", "data", "is_error"}
    if not (isinstance(result, dict) and keys <= set(result)):
        return result  # None (an error) or already an object
    from pydantic import ValidationError

    content: list[Any] = []
    for block in result["content"] or ():
        try:
            content.append(_content_adapter().validate_python(block))
        except ValidationError:
            content.append(block)  # a block MCP's types do not know: kept as sent
    return _result_class()(result, content=content, structured_content=result["structured_content"],
                           meta=result.get("meta"), data=result["data"], is_error=bool(result["is_error"]))


@functools.cache
def _content_adapter() -> Any:
    from mcp.types import ContentBlock
    from pydantic import TypeAdapter

    return TypeAdapter(ContentBlock)


@functools.cache
def _result_class() -> type:
    from fastmcp.client.client import CallToolResult

    class ToolResult(dict, CallToolResult):  # type: ignore[type-arg, misc]
        """FastMCP's ``CallToolResult`` (its attributes, ``isinstance``) whose mapping is the
        kernel's result, so transports and serializers keep sending exactly that."""

        def __init__(self, wire: dict[str, Any], **fields: Any) -> None:
            dict.__init__(self, wire)
            CallToolResult.__init__(self, **fields)

    ToolResult.__module__ = __name__
    return ToolResult


def _refuse_reserved(names: set[str]) -> None:
    conflicts = sorted(names & RESERVED_TOOL_NAMES)
    if conflicts:
        raise ReservedToolNameError(
            f"MCP tools cannot use reserved names: {conflicts}. Reserved names are: "
            f"{sorted(RESERVED_TOOL_NAMES)}: they are the control operations of every environment, so "
            "a tool with such a name would shadow them for agents. Rename the tool (e.g. "
            f"'{conflicts[0]}_board', or @mcp.tool(name=...))."
        )


def _refuse_injected_parameters(name: str, server_tool: Any, fn: Callable[..., Any]) -> None:
    """Refuse parameters FastMCP fills itself (a ``Context``, a dependency): they are in the function's
    signature but not in the tool's argument schema, and the kernel calls tools directly."""
    schema = getattr(server_tool, "parameters", None)
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return
    injected = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                and p.name not in schema["properties"]]
    if injected:
        refuse(
            f"MCP tool '{name}': parameters FastMCP injects itself ({', '.join(injected)}; a `Context` or a "
            "dependency)",
            "remove them and keep per-session state on the env instance (each session has its own env)",
            "The kernel calls tool functions directly, without a FastMCP request context",
        )


class MCPEnvironment(ToolEnvironment[Any, Any, Any], _CompatEnvironment[Any, Any, Any]):
    """Base of envs that expose a FastMCP server's tools; implement ``reset``, ``state``, ``_step_impl``."""

    # The action type is the kernel's tool dispatch (list_tools / call_tool / other), never `step`'s.
    _infer_action_from_step: ClassVar[bool] = False
    _complete_async_pair: ClassVar[bool] = False
    tool_timeout_s: ClassVar[float | None] = MCP_TOOL_CALL_TIMEOUT

    def __init__(self, mcp_server: Any, transform: Any = None) -> None:
        super().__init__()
        self.transform = transform  # upstream's MCPEnvironment takes a transform, no rubric
        self.mcp_server = mcp_server
        #: Upstream held an in-process FastMCP client here; the kernel calls the functions directly.
        self.mcp_client = None
        self._sync_server_tools()

    # -- tools ----------------------------------------------------------------------------------

    @property
    def tool_registry(self) -> ToolRegistry:
        """This instance's registry. Tool bodies run on tool worker threads under their deadline
        (upstream ran them off the session thread with a 30 s timeout), while ``reset`` and
        ``_step_impl`` keep the session's own thread."""
        registry: ToolRegistry | None = self.__dict__.get("_mcp_tool_registry")
        if registry is None:
            registry = ToolRegistry(default_timeout_s=self.tool_timeout_s)
            for attr in type(self).__tool_methods__:
                registry.add(getattr(self, attr))
            self.__dict__["_mcp_tool_registry"] = registry
        return registry

    def _sync_server_tools(self) -> None:
        """Register the server's function tools that are not registered yet."""
        server = self.__dict__.get("mcp_server")
        if server is None:
            return
        tools = get_server_tools(server)
        _refuse_reserved(set(tools))
        adapted: set[str] = self.__dict__.setdefault("_adapted_tools", set())
        known = adapted | {spec.name for spec in self.tool_registry.visible(None)}
        for name, server_tool in tools.items():
            if name in known:
                continue
            fn = getattr(server_tool, "fn", None)
            if not callable(fn):
                raise RuleViolation(
                    f"MCP tool '{name}' of {type(self).__qualname__} has no Python function behind it "
                    f"({type(server_tool).__name__}: a proxy or mounted server?). Register plain function "
                    "tools with @mcp.tool, or declare the tool with self.tool()."
                )
            _refuse_injected_parameters(name, server_tool, fn)
            try:
                self.add_tool(fn, name=name, description=getattr(server_tool, "description", None) or "")
            except RuleViolation as exc:
                raise RuleViolation(f"MCP tool '{name}' of {type(self).__qualname__}: {exc}") from exc
            adapted.add(name)

    def tool(self, mode: str | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        """Decorator registering a tool, in every mode (``None``) or in one (``"simulation"``/``"production"``)."""

        def register(func: Callable[..., Any]) -> Callable[..., Any]:
            if func.__name__ in RESERVED_TOOL_NAMES:
                _refuse_reserved({func.__name__})
            self.add_tool(func, mode=mode)
            return func

        if mode is not None and mode not in tuple(Mode):
            raise ValueError(f"Invalid mode '{mode}'. Mode must be 'production', 'simulation', or None.")
        return register

    def list_tools(self) -> list[Any]:
        # Tools may be added to the FastMCP server after construction (upstream listed them live).
        self._sync_server_tools()
        return super().list_tools()

    def step(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        from openenv.tools import CallToolAction

        if isinstance(action, CallToolAction) and action.tool_name not in {
                spec.name for spec in super().list_tools()}:
            self._sync_server_tools()  # a tool added to the FastMCP server after construction
        observation = super().step(action, timeout_s=timeout_s, **kwargs)
        if isinstance(observation, CallToolObservation):
            observation.result = mcp_result_object(observation.result)
        return observation

    # -- non-MCP actions ------------------------------------------------------------------------

    def step_other(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        return self._step_impl(action, timeout_s=timeout_s, **kwargs)

    def _step_impl(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        """Handle an action that is neither ``ListToolsAction`` nor ``CallToolAction``."""
        raise NotImplementedError(
            f"{type(self).__qualname__} does not handle {type(action).__name__}: implement _step_impl."
        )

    # -- upstream features that are not provided ------------------------------------------------

    @property
    def supports_code_mode(self) -> bool:
        """Always ``False``: agent code is never run in the server process (docs/protocol.md §11 B13)."""
        return False

    def get_callables(self) -> dict[str, Callable[..., Any]]:
        """The tool functions visible in this env's mode, by name."""
        return {spec.name: spec.fn for spec in self.list_tools()}

    def execute_code(self, code: str) -> Observation:
        refuse(
            "`MCPEnvironment.execute_code` (code mode)",
            "call tools one at a time (CallToolAction / MCPToolClient.call_tool), or run agent code in a "
            "sandboxed environment such as a coding env",
            "It executed agent code with exec() in the server process, unsandboxed (docs/protocol.md §11 B13)",
        )

    def mcp_session(self) -> Any:
        refuse(
            "`MCPEnvironment.mcp_session`",
            "call tools through step(CallToolAction(...)) or the MCP transport; the kernel calls tool "
            "functions directly, without an in-process FastMCP client",
        )

    def close(self) -> None:
        try:
            super().close()
        finally:
            registry: ToolRegistry | None = self.__dict__.pop("_mcp_tool_registry", None)
            if registry is not None:
                registry.close()
            self.mcp_server = None
