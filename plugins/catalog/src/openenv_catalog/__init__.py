"""openenvkit-catalog: ``openenv catalog build|inspect``, ``openenv discover``, ``openenv fork`` and
``openenv skills preview|add`` (docs/catalog.md)."""

from __future__ import annotations

__all__: list[str] = []
