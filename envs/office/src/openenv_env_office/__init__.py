"""Office (``office``): a tool-use app with real state (SQLite calendar, email, contacts, to-dos)
and a simulated user who holds the task's hidden goal.

Nothing heavy is imported here so that loading the plugin stays cheap; the env is
``openenv_env_office.env:OfficeEnv``.
"""

from __future__ import annotations

__all__: list[str] = []
