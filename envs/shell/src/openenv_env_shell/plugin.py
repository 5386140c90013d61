"""Plugin hooks of openenvkit-env-shell: registers ``shell`` (lazily)."""

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
        "shell", "openenv_env_shell.env:ShellEnv",
        description="Terminal tasks in a per-session git working tree (fix the failing test, ...); sandboxed commands.",
        manifest=MANIFEST,
    )
