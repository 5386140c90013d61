"""SQLite query tasks (see ``env.py``). Names are imported on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.lazy import lazy_exports

if TYPE_CHECKING:
    from openenv_env_sql.env import SqlEnv
    from openenv_env_sql.models import SqlAction, SqlObservation, SqlState


__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "SqlAction": ".models",
    "SqlEnv": ".env",
    "SqlObservation": ".models",
    "SqlState": ".models",
})
