"""OpenEnv MCP transport."""

from __future__ import annotations

__all__: list[str] = []
