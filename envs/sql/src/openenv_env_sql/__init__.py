"""SQLite query tasks (see ``env.py``). Names are imported on first use."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from openenv_env_sql.env import SqlEnv
    from openenv_env_sql.models import SqlAction, SqlObservation, SqlState

__all__ = ["SqlAction", "SqlEnv", "SqlObservation", "SqlState"]

_EXPORTS = {"SqlEnv": "openenv_env_sql.env", "SqlAction": "openenv_env_sql.models",
            "SqlObservation": "openenv_env_sql.models", "SqlState": "openenv_env_sql.models"}


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'openenv_env_sql' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
