"""Plugin hooks of openenvkit-rollouts: the ``openenv collect`` and ``openenv eval`` commands."""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.hookspecs import hookimpl

if TYPE_CHECKING:
    from openenv.registry import Registry

__all__ = ["openenv_register_commands"]


@hookimpl
def openenv_register_commands(registry: Registry) -> None:
    registry.register("collect", "openenv_rollouts.cli:collect_cmd",
                      description="Collect rollouts of an env into a JSONL/Parquet dataset (with a report).")
    registry.register("eval", "openenv_rollouts.cli_eval:app",
                      description="Evaluate a policy on a split of an env's tasks (pass@k, report), or compare "
                                  "two evals.")
