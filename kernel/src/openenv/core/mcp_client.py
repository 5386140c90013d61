"""``openenv.core.mcp_client``: upstream's ``MCPToolClient`` / ``MCPClientBase``.

The kernel imports no plugin. The tool client (``list_tools``, ``call_tool``, ``get_tool``,
``has_tool``, the ``POST /mcp`` + ``/ws`` session attach of docs/protocol.md §4.6, with the fixes of §11 B3)
belongs to a transport plugin, which declares it in the catalogue: its transport entry carries
``tool_client="pkg.module:ToolClient"``. On first use of a name of this module the class is looked
up there (the ``mcp`` transport first, then any other that declares one), given upstream's
constructor and sync/async dispatch by the same mixin as ``openenv.core.EnvClient``, and cached.
Its ``.sync()`` turns ``list_tools``/``call_tool`` into blocking calls.

Differences from upstream: ``list_tools`` raises instead of returning ``[]`` on failure, and
``call_tool`` raises ``ToolCallFailed`` (whose ``str()`` keeps upstream's ``Tool '<name>' failed:
<message>``) with the error class in ``error_type``. Both exception classes are the plugin's,
taken from the module that defines its tool client.

Without such a plugin, importing a name from here raises ``ImportError`` saying what to install
(``pip install openenvkit-transport-mcp``).
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from openenv.core.env_client import UpstreamClientMixin

# Resolved on first use by the module __getattr__ below (from the catalogue, not an import).
__all__ = ["MCPClientBase", "MCPToolClient", "ToolCallFailed", "ToolListError"]  # noqa: F822

#: The catalogue key a transport entry uses to declare its tool-client class.
TOOL_CLIENT_KEY = "tool_client"
_PREFERRED = "mcp"
_INSTALL = "pip install openenvkit-transport-mcp"

_lock = threading.Lock()
_resolved: dict[str, Any] = {}


def _plugin_tool_client() -> type:
    """The tool-client class declared by an installed transport plugin (``ImportError`` if none)."""
    from openenv.plugins import get_plugin_manager
    from openenv.registry import load_ref

    transports = get_plugin_manager().catalog.transports
    declared = [e for e in transports if getattr(e, TOOL_CLIENT_KEY, None)]
    declared.sort(key=lambda e: (e.name != _PREFERRED, e.name))
    if not declared:
        installed = ", ".join(transports.names()) or "none"
        raise ImportError(
            "openenv.core.mcp_client needs a transport plugin that provides an MCP tool client, and "
            f"no installed transport declares one (installed transports: {installed}). Install the "
            f"MCP transport: `{_INSTALL}`."
        )
    entry = declared[0]
    ref = getattr(entry, TOOL_CLIENT_KEY)
    try:
        cls = load_ref(ref)
    except Exception as exc:
        raise ImportError(
            f"The tool client {ref!r} declared by transport '{entry.name}' (plugin '{entry.plugin}') "
            f"could not be imported: {type(exc).__name__}: {exc}. Reinstall it: `{_INSTALL}`."
        ) from exc
    if not isinstance(cls, type):
        raise ImportError(
            f"Transport '{entry.name}' (plugin '{entry.plugin}') declares {TOOL_CLIENT_KEY}={ref!r}, "
            f"which is a {type(cls).__name__}, not a class. The plugin must name its client class."
        )
    return cls


def _build() -> dict[str, Any]:
    base = _plugin_tool_client()
    module = sys.modules[base.__module__]
    errors = {name: getattr(module, name, None) for name in ("ToolCallFailed", "ToolListError")}
    missing = [name for name, value in errors.items() if not isinstance(value, type)]
    if missing:
        raise ImportError(
            f"The tool client's module {base.__module__} defines no {', '.join(missing)}; the "
            f"installed MCP transport is too old for this OpenEnv. Upgrade it: `{_INSTALL} -U`."
        )

    def __init__(
        self: Any,
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
        super(client, self).__init__(  # type: ignore[arg-type]
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

    doc = (
        "``async with MCPToolClient(base_url=url) as env: await env.call_tool(\"echo\", message=\"hi\")``.\n\n"
        "The constructor takes upstream's ``MCPToolClient`` arguments in upstream's order (which differs\n"
        "from ``EnvClient``'s: ``max_message_size_mb`` comes after ``mode``). As upstream, ``mode``\n"
        "defaults to ``\"production\"`` and nothing else is accepted.\n"
    )
    def _parse_result(self: Any, payload: dict[str, Any]) -> Any:
        # Upstream's tool clients type every observation: tool results and listings (the plugin
        # does those), and any other observation (reset's) as an Observation keeping its fields.
        result = super(client, self)._parse_result(payload)  # type: ignore[misc, arg-type]
        if isinstance(result.observation, dict):
            result.observation = _generic_observation(result.observation, result.reward, result.done)
        return result

    def _parse_state(self: Any, payload: dict[str, Any]) -> Any:
        from openenv.core.env_server.types import State

        parsed = super(client, self)._parse_state(payload)  # type: ignore[misc, arg-type]
        return State.model_validate(parsed) if isinstance(parsed, dict) else parsed

    client: type = type("MCPToolClient", (UpstreamClientMixin, base),
                  {"__init__": __init__, "__doc__": doc, "__module__": __name__,
                   "__qualname__": "MCPToolClient", "_parse_result": _parse_result,
                   "_parse_state": _parse_state})
    # Upstream's base class of tool clients; here the same class.
    return {"MCPToolClient": client, "MCPClientBase": client, **errors}


def _generic_observation(data: dict[str, Any], reward: Any, done: bool) -> Any:
    """Upstream's ``GenericMCPObservation``: an ``Observation`` that keeps the env's own fields."""
    from pydantic import ConfigDict

    from openenv.core.env_server.types import Observation

    global _GenericMCPObservation
    if _GenericMCPObservation is None:
        _GenericMCPObservation = type("GenericMCPObservation", (Observation,), {
            "__module__": __name__, "__doc__": "An MCP env's observation with its own fields kept.",
            "model_config": ConfigDict(extra="allow"), "__annotations__": {}})
    fields = {k: v for k, v in data.items() if k not in ("done", "reward", "metadata")}
    return _GenericMCPObservation(done=done, reward=reward, metadata=data.get("metadata") or {}, **fields)


_GenericMCPObservation: Any = None


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    with _lock:
        if not _resolved:
            _resolved.update(_build())
    value = _resolved[name]
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
