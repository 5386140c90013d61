"""The kernel's own plugin: built-in fallbacks for decision hooks."""

from __future__ import annotations

from openenv.hookspecs import hookimpl


@hookimpl(trylast=True)
def openenv_choose_provider(env: str, requested: str | None, available: list[str]) -> str | None:
    """Fallback: what the user asked for, else the local provider."""
    return requested or "local"
