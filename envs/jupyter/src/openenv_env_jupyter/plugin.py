"""Plugin hooks of openenvkit-env-jupyter: registers ``jupyter`` (lazily)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from openenv.hookspecs import hookimpl

if TYPE_CHECKING:
    from openenv.registry import Registry

__all__ = ["MANIFEST", "openenv_register_envs"]

#: Absolute path of the env's ``openenv.yaml`` (shipped inside the wheel).
MANIFEST = str(Path(__file__).with_name("openenv.yaml"))


@hookimpl
def openenv_register_envs(registry: Registry) -> None:
    registry.register(
        "jupyter", "openenv_env_jupyter.env:JupyterEnv",
        description="A persistent IPython kernel per session: execute, restart, submit a data task's answer.",
        manifest=MANIFEST,
    )
