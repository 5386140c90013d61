"""Upstream's RFC 005 turn-based agentic harness, and a concrete adapter to run with it.

| module | what it holds |
|---|---|
| ``config`` | ``HarnessConfig``, ``HarnessTransport`` |
| ``events`` | ``HarnessEvent`` and its type, ``HarnessResponse``, ``HarnessClientMessage``, ``events_to_metadata`` |
| ``adapter`` | ``AgenticHarnessAdapter`` and the errors (``HarnessError`` …) |
| ``tools`` | ``resolve_tool_conflicts`` |
| ``process`` | ``HarnessProcess``: a harness program with line-based stdio |
| ``bridge`` | ``HarnessMCPBridge``, ``build_bridge_server``: the env's tools over loopback MCP |
| ``environment`` | ``HarnessAction``, ``HarnessEnvironment`` |
| ``command`` | ``CommandTurnAdapter``: any program speaking a JSON-lines protocol (ours) |
| ``transport`` | the ``/harness`` WebSocket channel (the ``harness`` transport) |

Every upstream name is also importable from ``openenv.core.harness`` when this plugin is installed.
"""

from __future__ import annotations

from openenv.lazy import lazy_exports

#: name -> module of this package; resolved on first use (nothing heavy at import).
EXPORTS = {
    "HarnessConfig": "config", "HarnessTransport": "config",
    "HarnessClientMessage": "events", "HarnessEvent": "events", "HarnessEventType": "events",
    "HarnessResponse": "events", "events_to_metadata": "events",
    "AgenticHarnessAdapter": "adapter", "HarnessError": "adapter", "HarnessNotRunningError": "adapter",
    "HarnessStartupError": "adapter", "HarnessTurnTimeoutError": "adapter",
    "resolve_tool_conflicts": "tools", "HarnessProcess": "process",
    "HarnessMCPBridge": "bridge", "build_bridge_server": "bridge",
    "HarnessAction": "environment", "HarnessEnvironment": "environment",
    "CommandTurnAdapter": "command",
}
#: The names upstream's ``openenv.core.harness`` defines (all but our own ``CommandTurnAdapter``).
UPSTREAM_NAMES = tuple(name for name in EXPORTS if name != "CommandTurnAdapter")

__getattr__, __dir__, __all__ = lazy_exports(__name__, {name: f".{module}" for name, module in EXPORTS.items()})
