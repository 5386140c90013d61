"""The Python coding environment (``coding``).

Nothing heavy is imported here so that loading the plugin stays cheap; the env is
``openenv_env_coding.env:CodingEnv``.
"""

from __future__ import annotations

__all__: list[str] = []
