"""Plugin hooks of openenvkit-env-sql: registers ``sql`` (lazily)."""

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
        "sql", "openenv_env_sql.env:SqlEnv",
        description="SQLite query tasks (read-only, in memory): reward 1.0 when the result set matches the reference.",
        manifest=MANIFEST,
    )


@hookimpl
def openenv_register_rubrics(registry: Registry) -> None:
    registry.register("sql_exact", "openenv_env_sql.rubrics:ExactResult",
                      description="SQL result sets: 1.0 when equal to the reference's (multiset or ordered), else 0.")
    registry.register("sql_overlap", "openenv_env_sql.rubrics:RowOverlap",
                      description="SQL result sets: partial credit, the multiset Jaccard overlap of the rows.")
