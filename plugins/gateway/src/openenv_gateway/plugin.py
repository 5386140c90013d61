"""Plugin hooks of openenvkit-gateway: the ``openenv agent-eval`` command, and upstream's black-box
harness names in ``openenv.core.harness`` (``CLIHarnessAdapter``, ``SessionMCPBridge``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.hookspecs import hookimpl

if TYPE_CHECKING:
    from openenv.registry import Registry

__all__ = ["openenv_register_commands", "openenv_upstream_names"]


@hookimpl
def openenv_register_commands(registry: Registry) -> None:
    registry.register("agent-eval", "openenv_gateway.cli:agent_eval_cmd",
                      description="Evaluate a black-box agent program on a split of an env's tasks through the "
                                  "token-capture gateway (rollout records with training samples).")


@hookimpl
def openenv_upstream_names(module: str) -> dict[str, str] | None:
    if module == "openenv.core.harness":
        return {name: f"openenv_gateway.cliharness:{name}" for name in ("CLIHarnessAdapter", "SessionMCPBridge")}
    return None
