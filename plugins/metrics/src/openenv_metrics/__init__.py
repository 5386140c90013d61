"""openenvkit-metrics: ``GET /metrics`` in Prometheus text format on every env server."""

from __future__ import annotations

__all__: list[str] = []
