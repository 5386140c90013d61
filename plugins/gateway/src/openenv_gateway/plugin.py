"""Plugin hooks of openenvkit-gateway: the ``openenv agent-eval`` command, the ``harness`` transport
(upstream's ``/harness`` channel of RFC 005), and upstream's harness names in
``openenv.core.harness``: the black-box adapter (``CLIHarnessAdapter``, ``SessionMCPBridge``) and
the RFC 005 turn-based harness (``HarnessEnvironment``, ``HarnessConfig``, …)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.hookspecs import hookimpl

if TYPE_CHECKING:
    from openenv.registry import Registry, TransportRegistry

__all__ = ["openenv_register_commands", "openenv_register_transports", "openenv_upstream_names"]

#: Upstream's RFC 005 names and the module of ``openenv_gateway.agentic`` each lives in (kept here,
#: not imported from the package, so loading the hooks imports nothing).
_AGENTIC = {
    "HarnessConfig": "config", "HarnessTransport": "config", "HarnessClientMessage": "events",
    "HarnessEvent": "events", "HarnessEventType": "events", "HarnessResponse": "events",
    "events_to_metadata": "events", "AgenticHarnessAdapter": "adapter", "HarnessError": "adapter",
    "HarnessNotRunningError": "adapter", "HarnessStartupError": "adapter", "HarnessTurnTimeoutError": "adapter",
    "resolve_tool_conflicts": "tools", "HarnessProcess": "process", "HarnessMCPBridge": "bridge",
    "build_bridge_server": "bridge", "HarnessAction": "environment", "HarnessEnvironment": "environment",
}


@hookimpl
def openenv_register_commands(registry: Registry) -> None:
    registry.register("agent-eval", "openenv_gateway.cli:agent_eval_cmd",
                      description="Evaluate a black-box agent program on a split of an env's tasks through the "
                                  "token-capture gateway (rollout records with training samples).")


@hookimpl
def openenv_register_transports(registry: TransportRegistry) -> None:
    registry.register("harness", server="openenv_gateway.agentic.transport:HarnessChannel",
                      description="Upstream's /harness WebSocket channel (RFC 005): a HarnessEnvironment's "
                                  "turns as streamed events, in production mode")


@hookimpl
def openenv_upstream_names(module: str) -> dict[str, str] | None:
    if module == "openenv.core.harness":
        names = {name: f"openenv_gateway.cliharness:{name}" for name in ("CLIHarnessAdapter", "SessionMCPBridge")}
        names.update({name: f"openenv_gateway.agentic.{mod}:{name}" for name, mod in _AGENTIC.items()})
        return names
    return None
