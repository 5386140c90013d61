"""``GET /metrics``: the server's session and step metrics in Prometheus text format.

The numbers come from the session manager's direct observers (``SessionManager.observe``): every
transport's sessions and steps go through it, so WebSocket, HTTP, MCP and ``/web`` traffic is
counted alike. Each server has its own ``CollectorRegistry`` (two apps in one process never mix
their counts). The route sits behind the kernel's auth guard like every other route: with a token
configured, a scrape without ``Authorization: Bearer <token>`` gets 401.

Metrics (label ``env`` on each):

* ``openenv_sessions_open`` (gauge), ``openenv_sessions_opened_total``,
  ``openenv_sessions_refused_total`` (server full), ``openenv_sessions_closed_total{reason}``
  (``client``, ``idle_timeout``, ``server_shutdown``, or ``lost``: any other reason, such as a
  dropped connection or an abandoned env);
* ``openenv_steps_total``, ``openenv_resets_total``;
* ``openenv_step_seconds`` and ``openenv_reset_seconds`` (histograms);
* ``openenv_errors_total{operation, code}`` (the error's wire code; ``operation`` is ``step``,
  ``reset``, or ``validate`` for an action refused before its step ran);
* ``openenv_rubric_seconds`` (histogram; only on a server with a rubric).

With the OpenTelemetry API installed, sessions, resets and steps are also spans
(``openenv_metrics.tracing``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from openenv.events import LifecycleEvent, OperationTimed, SessionClosed, SessionOpened, SessionRefused
from openenv.interfaces import ServerTransport
from openenv_metrics.tracing import SessionSpans, tracing_available

if TYPE_CHECKING:
    from starlette.requests import Request

    from openenv.context import ServerContext

__all__ = ["MetricsTransport", "ServerMetrics"]

#: Close reasons kept as label values; any other (free-form) reason counts as ``lost``, so the
#: label's values stay few.
_REASONS = {"client": "client", "closed": "client", "idle timeout": "idle_timeout",
            "server shutdown": "server_shutdown"}
#: Step latencies from an inline echo step (~20 µs) to a slow sandboxed one (tens of seconds).
_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
            10.0, 30.0, 60.0)


class ServerMetrics:
    """The metrics of one server, fed by its session manager's events."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.open = Gauge("openenv_sessions_open", "Sessions open now.", ["env"], registry=r)
        self.opened = Counter("openenv_sessions_opened", "Sessions opened.", ["env"], registry=r)
        self.refused = Counter("openenv_sessions_refused", "Sessions refused: the server was full.", ["env"],
                               registry=r)
        self.closed = Counter("openenv_sessions_closed", "Sessions closed, by reason (lost: dropped or failed).",
                              ["env", "reason"], registry=r)
        self.steps = Counter("openenv_steps", "Steps run (failed ones included).", ["env"], registry=r)
        self.resets = Counter("openenv_resets", "Resets run (failed ones included).", ["env"], registry=r)
        self.step_s = Histogram("openenv_step_seconds", "Step latency in the server.", ["env"], buckets=_BUCKETS,
                                registry=r)
        self.reset_s = Histogram("openenv_reset_seconds", "Reset latency in the server.", ["env"],
                                 buckets=_BUCKETS, registry=r)
        self.rubric_s = Histogram("openenv_rubric_seconds", "Time the server's rubric took per scored step.",
                                  ["env"], buckets=_BUCKETS, registry=r)
        self.errors = Counter("openenv_errors", "Failed resets and steps, by error code.",
                              ["env", "operation", "code"], registry=r)

    def __call__(self, event: LifecycleEvent) -> None:
        if isinstance(event, OperationTimed):
            env = event.env
            if event.operation == "step":
                self.steps.labels(env).inc()
                self.step_s.labels(env).observe(event.seconds)
                if event.rubric_seconds is not None:
                    self.rubric_s.labels(env).observe(event.rubric_seconds)
            elif event.operation == "reset":
                self.resets.labels(env).inc()
                self.reset_s.labels(env).observe(event.seconds)
            if event.error_code is not None:
                self.errors.labels(env, event.operation, event.error_code).inc()
        elif isinstance(event, SessionOpened):
            self.opened.labels(event.env).inc()
            self.open.labels(event.env).set(event.active_sessions)
        elif isinstance(event, SessionClosed):
            self.closed.labels(event.env, _REASONS.get(event.reason, "lost")).inc()
            self.open.labels(event.env).set(event.active_sessions)
        elif isinstance(event, SessionRefused):
            self.refused.labels(event.env).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)


class MetricsTransport(ServerTransport):
    """``GET /metrics`` of this server."""

    name = "metrics"

    def __init__(self, ctx: ServerContext) -> None:
        super().__init__(ctx)
        self.metrics = ServerMetrics()
        # Series exist from the start (a scrape before any session shows zeros, not nothing).
        env = str(ctx.env_name)
        for family in (self.metrics.open, self.metrics.opened, self.metrics.refused, self.metrics.steps,
                       self.metrics.resets):
            family.labels(env)
        ctx.sessions.observe(self.metrics)
        self.spans = None
        if tracing_available():  # OpenTelemetry spans too, when its API is installed (openenv_metrics.tracing)
            self.spans = SessionSpans()
            ctx.sessions.observe(self.spans)

    async def shutdown(self) -> None:
        if self.spans is not None:
            self.spans.close()

    def routes(self) -> list[BaseRoute]:
        return [Route("/metrics", self.scrape, methods=["GET"])]

    async def scrape(self, request: Request) -> Response:
        return Response(self.metrics.render(), media_type=CONTENT_TYPE_LATEST)

    def capabilities(self) -> dict[str, Any]:
        return {"metrics": {"path": "/metrics", "format": "prometheus", "otel_spans": self.spans is not None}}
