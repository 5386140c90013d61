"""``EnvPool``: one client-side pool of sessions spread over many env servers (issue 31, item 1).

Replicas are servers given as URLs or started through a provider (the same provider API that
``EnvClient.from_provider`` uses: ``local``, ``docker``, ``kubernetes``…). ``pool.session()``
places each new session on the healthy replica with the fewest sessions this pool placed there,
and yields an ``EnvClient`` (of ``client_type``) bound to that replica::

    async with EnvPool(env="echo", provider="local", replicas=2) as pool:
        async with pool.session() as env:
            await env.reset()

Promises:

* Liveness is ``handle.is_running()`` for a provider's replica and ``GET /health`` for every
  replica, checked every ``health_interval_s`` and at once when a session sees its connection drop
  or a connection attempt fails. A replica found down has its sessions marked lost
  (``EnvClient.mark_lost``): their next ``step``/``state`` raise ``SessionLostError``. New sessions
  go to the other replicas.
* A dead replica the pool started is stopped (nothing left behind) and replaced through the
  provider; a URL replica that answers again is used again.
* ``min_replicas``/``max_replicas``: when every healthy replica is at capacity (its
  ``max_sessions`` from ``/capabilities``, or ``sessions_per_replica=``) a provider pool starts
  another one, up to ``max_replicas``; a replica above ``min_replicas`` with no session for
  ``idle_timeout_s`` is stopped.
* With no replica usable, ``session()`` fails at once with ``PoolUnavailableError`` naming every
  replica and its last error (``.data["replicas"]``).
* ``pool.stats`` counts placements, refusals, lost/replaced replicas and launches;
  ``pool.metrics()`` renders them with the replicas' states as Prometheus text (prometheus-client,
  imported only then), ``pool.metrics(registry)`` registers them into a registry of yours, and
  ``pool.serve_metrics(port)`` serves ``GET /metrics`` on 127.0.0.1 (``openenv.pool_metrics``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from openenv.client import EnvClient, GenericEnvClient
from openenv.errors import ConfigError, OpenEnvError
from openenv.interfaces import LaunchSpec, Provider, ProviderHandle
from openenv.pool_metrics import (
    PoolMetricsServer,
    PoolStats,
    pool_metrics_text,
    register_pool_metrics,
    serve_pool_metrics,
)
from openenv.pool_sync import SyncEnvPool
from openenv.readiness import http_get
from openenv.types import StepResult

__all__ = ["EnvPool", "PoolUnavailableError", "ReplicaInfo", "SyncEnvPool"]

ActT = TypeVar("ActT")
ObsT = TypeVar("ObsT")
_T = TypeVar("_T")


class PoolUnavailableError(OpenEnvError, ConnectionError):
    """No replica of an ``EnvPool`` can take a session; ``.data["replicas"]`` lists each one's URL
    and last error."""


@dataclass(frozen=True)
class ReplicaInfo:
    """A replica as ``EnvPool.replicas()`` reports it."""

    url: str
    healthy: bool
    sessions: int
    capacity: int | None
    started_by_pool: bool
    last_error: str | None
    #: The provider's handle of a replica the pool started (its ``id`` names the Pod, actor or
    #: container), ``None`` for a URL.
    handle: ProviderHandle | None = None


@dataclass(eq=False)
class _Replica:
    url: str
    handle: ProviderHandle | None = None
    healthy: bool = True
    capacity: int | None = None
    last_error: str | None = None
    sessions: set[EnvClient[Any, Any]] = field(default_factory=set)
    idle_since: float = field(default_factory=time.monotonic)
    #: When it last answered a health check (``None``: never): bounds when a dead one died.
    seen_at: float | None = None

    def has_room(self) -> bool:
        return self.capacity is None or len(self.sessions) < self.capacity

    def info(self) -> ReplicaInfo:
        return ReplicaInfo(self.url, self.healthy, len(self.sessions), self.capacity, self.handle is not None,
                           self.last_error, self.handle)


class EnvPool(Generic[ActT, ObsT]):
    """Sessions spread over many env servers; see the module docstring.

    Give ``urls=[...]`` of running servers, or ``env=`` and ``provider=`` (``replicas=`` to start,
    ``min_replicas``/``max_replicas`` to bound scaling; ``launch=`` for a full ``LaunchSpec``).
    ``client_kwargs`` (``token=``, ``transport=``, ``action_type=``…) go to every session's client.
    """

    def __init__(
        self,
        urls: list[str] | None = None,
        *,
        env: str | None = None,
        provider: str | Provider | None = None,
        replicas: int | None = None,
        min_replicas: int | None = None,
        max_replicas: int | None = None,
        launch: LaunchSpec | None = None,
        sessions_per_replica: int | None = None,
        idle_timeout_s: float = 60.0,
        health_interval_s: float = 0.5,
        health_timeout_s: float = 2.0,
        client_type: type[EnvClient[Any, Any]] = GenericEnvClient,
        **client_kwargs: Any,
    ) -> None:
        if urls and (env is not None or provider is not None):
            raise ConfigError("EnvPool takes either urls=[...] of running servers or env=/provider= to start "
                              "them, not both.")
        if not urls and env is None and launch is None:
            raise ConfigError("EnvPool needs urls=[...] of running servers, or env='NAME' (with provider=, "
                              "'local' by default) to start replicas.")
        n = replicas if replicas is not None else (min_replicas if min_replicas is not None else 1)
        lo = min_replicas if min_replicas is not None else n
        hi = max_replicas if max_replicas is not None else max(n, lo)
        for name, value in (("replicas", n), ("min_replicas", lo), ("max_replicas", hi)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"EnvPool {name}= must be a non-negative integer, got {value!r}.")
        if not (lo <= n <= hi) or hi < 1:
            raise ConfigError(f"EnvPool needs min_replicas <= replicas <= max_replicas and max_replicas >= 1; got "
                              f"min={lo}, replicas={n}, max={hi}.")
        if sessions_per_replica is not None and sessions_per_replica < 1:
            raise ConfigError(f"sessions_per_replica must be >= 1, got {sessions_per_replica!r}.")
        self._urls = list(urls or [])
        self._spec = launch or (LaunchSpec(env=env) if env is not None else None)
        self._provider_arg = provider
        self._provider: Provider | None = None
        self._n, self._min, self._max = n, lo, hi
        self._per_replica = sessions_per_replica
        self._idle_timeout_s = idle_timeout_s
        self._health_interval_s = health_interval_s
        self._health_timeout_s = health_timeout_s
        self._client_type = client_type
        if self._spec is not None and self._spec.token and "token" not in client_kwargs:
            client_kwargs["token"] = self._spec.token
        self._client_kwargs = client_kwargs
        self._replicas: list[_Replica] = []
        self._placed: dict[EnvClient[Any, Any], _Replica] = {}
        #: Counters behind ``metrics()`` (placements, refusals, lost/replaced replicas, launches).
        self.stats = PoolStats()
        self._lock = asyncio.Lock()
        self._monitor: asyncio.Task[None] | None = None
        self._launch_errors: list[str] = []
        self._next_launch = 0.0
        self._launch_failures = 0
        self._started = False
        self._closed = False

    # -- lifecycle --------------------------------------------------------------------------------

    async def start(self) -> EnvPool[ActT, ObsT]:
        """Start (or probe) the replicas and the health monitor. Called by ``async with``."""
        if self._started:
            return self
        self._started = True
        try:
            if self._urls:
                for url in self._urls:
                    replica = _Replica(url.rstrip("/"))
                    self._replicas.append(replica)
                    await self._probe(replica)
            else:
                self._provider = self._load_provider()
                started = await asyncio.gather(*(self._launch() for _ in range(self._n)), return_exceptions=True)
                for item in started:
                    if isinstance(item, BaseException):
                        raise item
        except BaseException:
            await self.close()
            raise
        self._monitor = asyncio.create_task(self._watch(), name="openenv-pool-monitor")
        return self

    async def close(self) -> None:
        """Close every session, stop the monitor and every replica the pool started."""
        if self._closed:
            return
        self._closed = True
        if self._monitor is not None:
            self._monitor.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._monitor
        for replica in list(self._replicas):
            for client in list(replica.sessions):
                with contextlib.suppress(Exception):
                    await client.close()
            await self._stop(replica)
        self._replicas.clear()
        self._placed.clear()

    async def __aenter__(self) -> EnvPool[ActT, ObsT]:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- sessions ---------------------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def session(self) -> AsyncIterator[EnvClient[ActT, ObsT]]:
        """A connected client on the least-loaded healthy replica, closed (and its slot freed) on exit."""
        client = await self.acquire()
        try:
            yield client
        finally:
            await self.release(client)

    async def acquire(self) -> EnvClient[ActT, ObsT]:
        """A connected client on the least-loaded healthy replica; hand it back with ``release``
        (``session()`` does both)."""
        client, replica = await self._open()
        self._placed[client] = replica
        return client

    async def release(self, client: EnvClient[ActT, ObsT]) -> None:
        """Close a client from ``acquire`` and free its slot. A client whose connection dropped gets
        its replica checked now rather than at the next tick."""
        replica = self._placed.pop(client, None)
        lost = not client.connected
        with contextlib.suppress(Exception):
            await client.close()
        if replica is None:
            return
        replica.sessions.discard(client)
        if not replica.sessions:
            replica.idle_since = time.monotonic()
        if lost and replica.healthy and not self._closed:
            await self._probe(replica)

    async def fork(self, client: EnvClient[Any, Any]) -> tuple[EnvClient[ActT, ObsT], StepResult[Any]]:
        """A new session of the pool continuing ``client``'s episode from its current point, on
        the least-loaded healthy replica (often another server); hand it back with ``release``.
        The env must support snapshots (``SnapshotError`` otherwise)."""
        return await self.restore(await client.snapshot())

    async def restore(self, snapshot: dict[str, Any]) -> tuple[EnvClient[ActT, ObsT], StepResult[Any]]:
        """A new session of the pool continuing the episode of a stored ``snapshot`` (from
        ``EnvClient.snapshot()``), e.g. one taken before its server died; hand it back with
        ``release``. Replicas accept each other's snapshots when they share the snapshot key
        (``OPENENV_SNAPSHOT_KEY``, or the same token; unkeyed servers always do)."""
        client = await self.acquire()
        try:
            return client, await client.restore(snapshot)
        except BaseException:
            await self.release(client)
            raise

    async def _open(self) -> tuple[EnvClient[ActT, ObsT], _Replica]:
        if not self._started:
            await self.start()
        if self._closed:
            raise ConfigError("This EnvPool is closed; create a new one.")
        # Each failed connection marks its replica down, so this ends after at most one try per replica.
        for _ in range(self._max + len(self._urls) + 1):
            replica = await self._place()
            client: EnvClient[ActT, ObsT] = self._client_type(replica.url, **self._client_kwargs)
            replica.sessions.add(client)
            try:
                await client.connect()
            except (ConnectionError, OSError) as exc:
                replica.sessions.discard(client)
                self.stats.refuse("connect_failed")
                await self._mark_down(replica, f"connect failed: {exc}")
                continue
            except BaseException as exc:
                replica.sessions.discard(client)
                if isinstance(exc, OpenEnvError):  # the replica refused (e.g. CAPACITY, AUTH)
                    self.stats.refuse(str(exc.code or type(exc).__name__))
                raise
            self.stats.placed(replica.url)
            return client, replica
        self.stats.refuse("unavailable")
        raise self._unavailable()

    async def _place(self) -> _Replica:
        async with self._lock:
            healthy = [r for r in self._replicas if r.healthy]
            roomy = [r for r in healthy if r.has_room()]
            if not roomy and self._can_launch():
                try:
                    return await self._launch()
                except Exception:
                    pass  # recorded in _launch_errors; fall back to the replicas there are
            if not healthy:
                # A replica that came back (a restarted URL server) is used again.
                for r in self._replicas:
                    await self._probe(r)
                healthy = [r for r in self._replicas if r.healthy]
            if not healthy:
                self.stats.refuse("unavailable")
                raise self._unavailable()
            # Over capacity everywhere (and no room to scale): the server decides (CapacityError).
            return min(roomy or healthy, key=lambda r: len(r.sessions))

    def _unavailable(self) -> PoolUnavailableError:
        rows = [{"url": r.url, "error": r.last_error or "unhealthy"} for r in self._replicas]
        rows += [{"url": "(launch)", "error": e} for e in self._launch_errors[-3:]]
        listing = "; ".join(f"{row['url']}: {row['error']}" for row in rows) or "no replicas"
        fix = ("Start the servers again (they are reused once /health answers), or check the provider's "
               "logs with `openenv providers ps`.")
        return PoolUnavailableError(f"No replica of the pool can take a session ({listing}). {fix}",
                                    code="POOL_UNAVAILABLE", data={"replicas": rows})

    # -- replicas ---------------------------------------------------------------------------------

    def replicas(self) -> list[ReplicaInfo]:
        """Every replica with its health, sessions placed by this pool, capacity and last error."""
        return [r.info() for r in self._replicas]

    def _load_provider(self) -> Provider:
        if isinstance(self._provider_arg, Provider):
            return self._provider_arg
        from openenv.plugins import get_plugin_manager

        assert self._spec is not None
        pm = get_plugin_manager()
        name = pm.choose_provider(self._spec.env, self._provider_arg)
        return pm.catalog.providers.load(name)()  # type: ignore[no-any-return]

    def _can_launch(self) -> bool:
        return (self._provider is not None and len(self._replicas) < self._max
                and time.monotonic() >= self._next_launch)

    async def _launch(self) -> _Replica:
        assert self._provider is not None and self._spec is not None
        self.stats.launches += 1
        try:
            with _launch_span(self._provider, self._spec):
                handle = await asyncio.to_thread(self._provider.start, self._spec)
        except Exception as exc:
            self.stats.launch_failures += 1
            self._launch_failures += 1
            # Back off so a provider that keeps failing is not hammered by every tick and placement.
            self._next_launch = time.monotonic() + min(30.0, 0.5 * 2 ** self._launch_failures)
            self._launch_errors.append(f"{type(exc).__name__}: {exc}")
            raise
        self._launch_failures = 0
        replica = _Replica(handle.base_url.rstrip("/"), handle=handle)
        if self._closed:
            await self._stop(replica)
            raise ConfigError("The EnvPool was closed while a replica was starting.")
        self._replicas.append(replica)
        await self._probe(replica)
        return replica

    async def _stop(self, replica: _Replica) -> None:
        if replica.handle is not None:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(replica.handle.stop)

    async def _probe(self, replica: _Replica) -> bool:
        """Check one replica; marks it down (its sessions lost) or up. Returns whether it is healthy."""
        if replica.handle is not None and not replica.handle.is_running():
            await self._mark_down(replica, "the server process exited")
            return False
        headers = self._auth_headers()
        try:
            status, _ = await asyncio.to_thread(http_get, replica.url, "/health", headers=headers,
                                                timeout_s=self._health_timeout_s)
            if status != 200:
                raise ConnectionError(f"/health answered HTTP {status}")
            if replica.capacity is None:
                replica.capacity = self._per_replica or await self._capacity(replica, headers)
        except Exception as exc:
            await self._mark_down(replica, f"{type(exc).__name__}: {exc}")
            return False
        if not replica.healthy:
            replica.healthy, replica.idle_since = True, time.monotonic()
        replica.last_error, replica.seen_at = None, time.monotonic()
        return True

    async def _capacity(self, replica: _Replica, headers: dict[str, str]) -> int | None:
        status, body = await asyncio.to_thread(http_get, replica.url, "/capabilities", headers=headers,
                                               timeout_s=self._health_timeout_s)
        if status != 200:
            return None  # an upstream server without /capabilities: no known capacity
        value = json.loads(body).get("max_sessions")
        return value if isinstance(value, int) and value > 0 else None

    def _auth_headers(self) -> dict[str, str]:
        token = self._client_kwargs.get("token")
        return {"Authorization": f"Bearer {token}"} if token else {}

    async def _mark_down(self, replica: _Replica, reason: str) -> None:
        was_up = replica.healthy
        replica.healthy, replica.last_error = False, reason
        lost = list(replica.sessions)
        for client in lost:
            await client.mark_lost(f"replica {replica.url} is down ({reason})")
        # Counted once per death of a replica that had answered, not at every failed probe after,
        # nor for one that never came up (it shows as down in the metrics).
        if was_up and replica.seen_at is not None:
            self.stats.lost(time.monotonic() - replica.seen_at)

    async def _watch(self) -> None:
        """Health checks, replacement of dead replicas the pool started, and idle scale-down."""
        while not self._closed:
            await asyncio.sleep(self._health_interval_s)
            for replica in list(self._replicas):
                await self._probe(replica)
            async with self._lock:
                for replica in [r for r in self._replicas if not r.healthy and r.handle is not None]:
                    # A dead server the pool started is removed for good and replaced below.
                    self._replicas.remove(replica)
                    await self._stop(replica)
                    self.stats.replicas_replaced += 1
                now = time.monotonic()
                idle = [r for r in self._replicas if r.handle is not None and r.healthy and not r.sessions
                        and now - r.idle_since >= self._idle_timeout_s]
                for replica in idle[: max(0, len(self._replicas) - self._min)]:
                    self._replicas.remove(replica)
                    await self._stop(replica)
                while self._provider is not None and len(self._replicas) < self._min and self._can_launch():
                    with contextlib.suppress(Exception):
                        await self._launch()

    @property
    def replacements(self) -> int:
        """Dead replicas the pool started that it replaced through the provider."""
        return self.stats.replicas_replaced

    # -- metrics ----------------------------------------------------------------------------------

    def metrics(self, registry: Any = None, *, labels: dict[str, str] | None = None) -> str | None:
        """The pool's metrics (see ``openenv.pool_metrics``): Prometheus text, or with a
        prometheus-client ``registry`` registered into it (read at each scrape; returns ``None``).
        ``labels`` go on every sample. ``ConfigError`` if prometheus-client is not installed."""
        if registry is None:
            return pool_metrics_text(self, labels)
        register_pool_metrics(self, registry, labels)
        return None

    def serve_metrics(self, port: int = 0, *, host: str = "127.0.0.1",
                      token: str | None = None) -> PoolMetricsServer:
        """Serve ``metrics()`` at ``http://127.0.0.1:port/metrics`` until ``.close()`` (``port=0``:
        a free one); ``token`` (default: the pool's) is required as ``Authorization: Bearer``."""
        return serve_pool_metrics(self, port, host=host, token=token or self._client_kwargs.get("token"))

    # -- blocking twin ----------------------------------------------------------------------------

    def sync(self) -> SyncEnvPool[ActT, ObsT]:
        """A blocking twin of this pool (runs it on a background event-loop thread)."""
        return SyncEnvPool(self)


def _launch_span(provider: Provider, spec: LaunchSpec) -> contextlib.AbstractContextManager[Any]:
    """An OpenTelemetry span ``openenv.launch`` around a replica's start when the OpenTelemetry API
    is installed (and ``OPENENV_OTEL`` is not ``0``); nothing otherwise. A failed start records the
    exception on the span."""
    from openenv.events import otel_trace

    trace = otel_trace()
    if trace is None:
        return contextlib.nullcontext()
    return trace.get_tracer("openenv").start_as_current_span(
        "openenv.launch", attributes={"openenv.provider": str(getattr(provider, "name", type(provider).__name__)),
                                      "openenv.env": spec.env})
