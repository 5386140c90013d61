"""The pool's own metrics (issue 31, item 5): what an operator scrapes to see an ``EnvPool`` work.

``PoolStats`` counts in plain Python (the kernel never needs prometheus-client); ``pool.metrics()``
turns them into Prometheus text, or registers them into a ``CollectorRegistry`` of the caller's,
with prometheus-client imported only then. ``serve_pool_metrics`` serves ``GET /metrics`` on
127.0.0.1 from a daemon thread (``openenv collect --replicas N --metrics-port P`` uses it).

Metrics (prefix ``openenv_pool_``):

* ``replicas{state}`` (gauge): replicas by state, ``ready`` (healthy, with room), ``full``
  (healthy, at capacity) and ``down``.
* ``sessions{replica}`` (gauge): sessions this pool has open on each current replica.
* ``placements_total{replica}`` (counter): sessions placed on each replica, removed ones included.
* ``placements_refused_total{reason}`` (counter): ``session()``/``acquire()`` calls or placement
  attempts that got no session: ``unavailable`` (no replica usable: ``PoolUnavailableError``),
  ``connect_failed`` (the chosen replica did not answer; the pool tried another), or the error
  code a replica refused with (e.g. ``CAPACITY``).
* ``replicas_lost_total`` / ``replicas_replaced_total`` (counters): replicas that had served found
  down (one that never came up counts only as ``down``), and dead replicas the pool started that it
  replaced through the provider.
* ``launches_total`` / ``launch_failures_total`` (counters): replica starts through the provider.
* ``session_lost_seconds`` (histogram): per replica found down, the time from its last successful
  health check to its sessions being marked lost (a step in flight fails then, the next one raises
  ``SessionLostError``). The replica died somewhere in that window, so this is an upper bound of
  the time from its death to ``SessionLostError``.
"""

from __future__ import annotations

import hmac
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from openenv.errors import ConfigError

if TYPE_CHECKING:
    from openenv.pool import EnvPool

__all__ = ["LOSS_BUCKETS", "PoolMetricsServer", "PoolStats", "pool_metrics_text", "register_pool_metrics",
           "serve_pool_metrics"]

#: Upper bounds (seconds) of the ``session_lost_seconds`` buckets; the issue's goal is < 1 s.
LOSS_BUCKETS: tuple[float, ...] = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_PREFIX = "openenv_pool"


@dataclass
class PoolStats:
    """Counters an ``EnvPool`` keeps about itself (``pool.stats``)."""

    placements: dict[str, int] = field(default_factory=dict)
    refused: dict[str, int] = field(default_factory=dict)
    replicas_lost: int = 0
    replicas_replaced: int = 0
    launches: int = 0
    launch_failures: int = 0
    #: ``session_lost_seconds``: count per bucket of ``LOSS_BUCKETS`` (not cumulative), then sum/count.
    loss_buckets: list[int] = field(default_factory=lambda: [0] * len(LOSS_BUCKETS))
    loss_sum: float = 0.0
    loss_count: int = 0

    def placed(self, url: str) -> None:
        self.placements[url] = self.placements.get(url, 0) + 1

    def refuse(self, reason: str) -> None:
        self.refused[reason] = self.refused.get(reason, 0) + 1

    def lost(self, seconds: float) -> None:
        """A replica that had answered found down, ``seconds`` after its last good health check."""
        self.replicas_lost += 1
        seconds = max(0.0, seconds)
        for i, bound in enumerate(LOSS_BUCKETS):
            if seconds <= bound:
                self.loss_buckets[i] += 1
                break
        self.loss_sum += seconds
        self.loss_count += 1


def _prometheus() -> Any:
    try:
        import prometheus_client
    except ImportError:
        raise ConfigError("The pool's metrics need prometheus-client, which is not installed: "
                          "`pip install prometheus-client` (or install openenvkit-metrics).") from None
    return prometheus_client


class _PoolCollector:
    """A prometheus-client collector reading a pool's state at each scrape."""

    def __init__(self, pool: EnvPool[Any, Any], labels: dict[str, str]) -> None:
        self._pool = pool
        self._labels = labels

    def describe(self) -> list[Any]:
        return []  # values are read at scrape time; nothing to check at registration

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        keys = list(self._labels)
        extra = [self._labels[k] for k in keys]
        stats = self._pool.stats
        replicas = self._pool.replicas()

        states = GaugeMetricFamily(f"{_PREFIX}_replicas", "Replicas of the pool by state (ready, full, down).",
                                   labels=[*keys, "state"])
        by_state = {"ready": 0, "full": 0, "down": 0}
        for r in replicas:
            full = r.capacity is not None and r.sessions >= r.capacity
            by_state["down" if not r.healthy else "full" if full else "ready"] += 1
        for state, n in by_state.items():
            states.add_metric([*extra, state], n)
        yield states

        sessions = GaugeMetricFamily(f"{_PREFIX}_sessions", "Sessions this pool has open on each replica.",
                                     labels=[*keys, "replica"])
        for r in replicas:
            sessions.add_metric([*extra, r.url], r.sessions)
        yield sessions

        placed = CounterMetricFamily(f"{_PREFIX}_placements", "Sessions placed on each replica.",
                                     labels=[*keys, "replica"])
        for url, n in sorted(dict(stats.placements).items()):
            placed.add_metric([*extra, url], n)
        yield placed

        refused = CounterMetricFamily(f"{_PREFIX}_placements_refused",
                                      "Session requests or placement attempts that got no session, by reason.",
                                      labels=[*keys, "reason"])
        for reason, n in sorted(dict(stats.refused).items()):
            refused.add_metric([*extra, reason], n)
        yield refused

        for name, text, value in (
            ("replicas_lost", "Replicas found down.", stats.replicas_lost),
            ("replicas_replaced", "Dead replicas the pool started that it replaced through the provider.",
             stats.replicas_replaced),
            ("launches", "Replicas started through the provider.", stats.launches),
            ("launch_failures", "Replica starts through the provider that failed.", stats.launch_failures),
        ):
            counter = CounterMetricFamily(f"{_PREFIX}_{name}", text, labels=keys)
            counter.add_metric(extra, value)
            yield counter

        histogram = HistogramMetricFamily(
            f"{_PREFIX}_session_lost_seconds",
            "Per replica found down: seconds from its last good health check to its sessions marked lost.",
            labels=keys)
        cumulative, running = [], 0
        for bound, n in zip(LOSS_BUCKETS, list(stats.loss_buckets), strict=True):
            running += n
            cumulative.append((_bound(bound), float(running)))
        cumulative.append(("+Inf", float(stats.loss_count)))
        histogram.add_metric(extra, cumulative, stats.loss_sum)
        yield histogram


def _bound(value: float) -> str:
    return repr(float(value))


def register_pool_metrics(pool: EnvPool[Any, Any], registry: Any,
                          labels: dict[str, str] | None = None) -> Any:
    """Register ``pool``'s metrics into a prometheus-client ``registry``; returns the collector
    (``registry.unregister(collector)`` removes it). ``labels`` are added to every sample, e.g.
    ``{"pool": "train"}`` to tell two pools in one registry apart."""
    _prometheus()
    collector = _PoolCollector(pool, dict(labels or {}))
    registry.register(collector)
    return collector


def pool_metrics_text(pool: EnvPool[Any, Any], labels: dict[str, str] | None = None) -> str:
    """``pool``'s metrics in the Prometheus text format."""
    prometheus_client = _prometheus()
    registry = prometheus_client.CollectorRegistry(auto_describe=False)
    register_pool_metrics(pool, registry, labels)
    return str(prometheus_client.generate_latest(registry).decode())


class PoolMetricsServer:
    """``GET /metrics`` of a pool on ``host:port`` from a daemon thread; ``close()`` stops it."""

    def __init__(self, render: Callable[[], str], host: str, port: int, token: str | None) -> None:
        render_fn, secret = render, token

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path.split("?", 1)[0] != "/metrics":
                    self._answer(404, "Not found: the pool's metrics are at GET /metrics.\n")
                    return
                if secret is not None:
                    given = self.headers.get("Authorization", "")
                    if not hmac.compare_digest(given.encode(), f"Bearer {secret}".encode()):
                        self._answer(401, "Unauthorized: send `Authorization: Bearer <token>` (the pool's "
                                          "token).\n")
                        return
                self._answer(200, render_fn(), "text/plain; version=0.0.4; charset=utf-8")

            def _answer(self, status: int, body: str, kind: str = "text/plain; charset=utf-8") -> None:
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return  # scrapes every few seconds would flood the run's output

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self.host, self.port = host, int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="openenv-pool-metrics", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5.0)


def serve_pool_metrics(pool: EnvPool[Any, Any], port: int = 0, *, host: str = "127.0.0.1",
                       token: str | None = None) -> PoolMetricsServer:
    """Serve ``pool``'s metrics at ``http://host:port/metrics`` (``port=0``: a free one, see
    ``.port``); with ``token``, a scrape must send ``Authorization: Bearer <token>``. Binds
    127.0.0.1 unless told otherwise."""
    _prometheus()
    if not 0 <= port <= 65535:
        raise ConfigError(f"metrics port {port} is not a TCP port: use 1-65535 (or 0 for a free one).")
    try:
        return PoolMetricsServer(lambda: pool_metrics_text(pool), host, port, token)
    except OSError as exc:
        raise ConfigError(f"Cannot serve the pool's metrics on {host}:{port}: {exc.strerror or exc}. Pick "
                          "another --metrics-port (or 0 for a free one).") from None
