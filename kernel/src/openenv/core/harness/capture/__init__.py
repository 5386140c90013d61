"""``openenv.core.harness.capture``: only ``upstream.training_sampling`` is provided (TRL imports it)."""

from __future__ import annotations

__all__: list[str] = []
