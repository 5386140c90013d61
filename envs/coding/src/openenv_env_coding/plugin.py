"""Plugin hooks of openenvkit-env-coding: registers ``coding`` (lazily)."""

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
        "coding", "openenv_env_coding.env:CodingEnv",
        description="Python coding tasks with hidden tests (run_code, run_tests, submit); sandboxed execution.",
        manifest=MANIFEST,
    )
