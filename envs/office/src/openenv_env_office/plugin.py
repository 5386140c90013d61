"""Plugin hooks of openenvkit-env-office: registers ``office`` and its rubric ``office_checks`` (lazily)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from openenv.hookspecs import hookimpl

if TYPE_CHECKING:
    from openenv.registry import Registry

__all__ = ["MANIFEST", "openenv_register_envs", "openenv_register_rubrics"]

#: Absolute path of the env's ``openenv.yaml`` (shipped inside the wheel).
MANIFEST = str(Path(__file__).with_name("openenv.yaml"))


@hookimpl
def openenv_register_envs(registry: Registry) -> None:
    registry.register(
        "office", "openenv_env_office.env:OfficeEnv",
        description="Office tools over MCP (calendar, email, contacts, to-dos in SQLite) with a simulated "
        "user; reward 1.0 when the database ends in the goal state.",
        manifest=MANIFEST,
    )


@hookimpl
def openenv_register_rubrics(registry: Registry) -> None:
    registry.register("office_checks", "openenv_env_office.rubrics:OfficeChecks",
                      description="office: the env's reward, with finish()'s database checks as components.")
