"""Local providers: env servers as child processes (``local``) or in isolated uv environments
(``uv``). Import the providers from ``openenv_provider_local.local`` / ``.uv``; this package
imports nothing heavy on its own."""

from __future__ import annotations

__all__: list[str] = []
