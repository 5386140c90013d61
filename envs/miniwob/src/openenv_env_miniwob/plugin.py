"""Plugin hooks of openenvkit-env-miniwob: registers ``miniwob`` (lazily)."""

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
        "miniwob", "openenv_env_miniwob.env:MiniWoBEnv",
        description="MiniWoB++ web tasks in Debian's Chromium (page, seed, split via reset): element refs, "
        "utterance, screenshot; click/type/key/scroll.",
        manifest=MANIFEST,
    )
