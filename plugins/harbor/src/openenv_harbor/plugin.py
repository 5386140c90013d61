"""Plugin hooks of openenvkit-harbor: registers the ``harbor`` env (served as ``harbor:PATH``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from openenv.hookspecs import hookimpl

if TYPE_CHECKING:
    from openenv.registry import Registry

__all__ = ["MANIFEST", "openenv_register_commands", "openenv_register_envs"]

#: Absolute path of the env's ``openenv.yaml`` (shipped inside the wheel).
MANIFEST = str(Path(__file__).with_name("openenv.yaml"))


@hookimpl
def openenv_register_envs(registry: Registry) -> None:
    registry.register(
        "harbor", "openenv_harbor.env:HarborEnv", manifest=MANIFEST,
        description="Harbor-format task suites (serve harbor:PATH): shell commands in a bubblewrap box, "
                    "graded in a fresh box as another user.",
    )


@hookimpl
def openenv_register_commands(registry: Registry) -> None:
    registry.register("harbor", "openenv_harbor.cli:app",
                      description="Harbor-format task suites: describe (info), play one task (rollout), serve.")
    registry.register("tasks", "openenv_harbor.swegen.cli:app",
                      description="Generated task suites: tasks generate swe (bugs injected into real "
                                  "projects' code, caught by their own tests) as Harbor tasks.")
