"""The ``local`` provider: ``python -m openenv serve`` as a child process of this interpreter.

The server runs in the same Python environment as the caller, so the env must be installed here
(a registered name) or importable (``module:Class``, with ``PYTHONPATH`` in ``LaunchSpec.env_vars``
if needed). ``LaunchSpec.image`` is ignored. Options: see ``base.COMMON_OPTIONS``.
"""

from __future__ import annotations

import sys
from typing import ClassVar

from openenv.interfaces import LaunchSpec
from openenv_provider_local.base import ProcessProvider

__all__ = ["LocalProvider"]


class LocalProvider(ProcessProvider):
    """Env servers as child processes of this interpreter, on 127.0.0.1."""

    name: ClassVar[str] = "local"

    def check(self, spec: LaunchSpec) -> None:
        super().check(spec)
        if ":" not in spec.env:
            # An unknown name fails fast here, with a suggestion, instead of in the child's log.
            from openenv.plugins import get_plugin_manager

            get_plugin_manager().catalog.envs.get(spec.env)

    def command(self, spec: LaunchSpec, serve_args: list[str]) -> list[str]:
        return [sys.executable, "-m", "openenv", "serve", *serve_args]
