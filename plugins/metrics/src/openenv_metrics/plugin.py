"""Plugin hooks of openenvkit-metrics: registers the server-only ``metrics`` transport (lazily)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from openenv.hookspecs import hookimpl

if TYPE_CHECKING:
    from openenv.registry import TransportRegistry

__all__ = ["openenv_register_transports"]


@hookimpl
def openenv_register_transports(registry: TransportRegistry) -> None:
    """Register ``metrics``: ``GET /metrics`` (Prometheus text format); there is no client side."""
    registry.register(
        "metrics",
        server="openenv_metrics.server:MetricsTransport",
        client=None,
        description="GET /metrics: sessions, steps, latency and errors in Prometheus format",
    )
