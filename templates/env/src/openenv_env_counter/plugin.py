"""Plugin hooks: registers the ``counter`` env (a lazy reference: nothing heavy is imported)."""

from __future__ import annotations

from typing import Any

from openenv.hookspecs import hookimpl

__all__ = ["openenv_register_envs"]


@hookimpl
def openenv_register_envs(registry: Any) -> None:
    registry.register("counter", "openenv_env_counter.env:CounterEnv",
                      description="Add 1-3 per step; reach the target exactly.")
