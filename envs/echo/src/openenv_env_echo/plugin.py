"""Plugin hooks of openenvkit-env-echo: registers ``echo`` and ``echo_async`` (lazily)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from openenv.hookspecs import hookimpl

if TYPE_CHECKING:
    from openenv.registry import EnvRegistry

__all__ = ["MANIFEST", "openenv_register_envs"]

#: Absolute path of the env's ``openenv.yaml`` (shipped inside the wheel).
MANIFEST = str(Path(__file__).with_name("openenv.yaml"))


@hookimpl
def openenv_register_envs(registry: EnvRegistry) -> None:
    registry.register(
        "echo", "openenv_env_echo.env:EchoEnv",
        description="Echoes a message back; reward 0.1 per character.",
        manifest=MANIFEST,
    )
    registry.register(
        "echo_async", "openenv_env_echo.env:AsyncEchoEnv",
        description="The echo env with native async reset/step (for benchmarks).",
        manifest=MANIFEST,
    )
