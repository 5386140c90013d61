"""The shell environment (``shell``).

Nothing heavy is imported here so that loading the plugin stays cheap; the env is
``openenv_env_shell.env:ShellEnv``.
"""

from __future__ import annotations

__all__: list[str] = []
