"""``SyncEnvPool``: the blocking twin of ``openenv.pool.EnvPool`` (``pool.sync()``), which runs the
pool on a background event-loop thread and lends blocking clients of its sessions."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from openenv.client import EnvClient
from openenv.client_sync import SyncEnvClient, _LoopThread

if TYPE_CHECKING:
    from openenv.pool import EnvPool, ReplicaInfo
    from openenv.pool_metrics import PoolMetricsServer

__all__ = ["SyncEnvPool"]

ActT = TypeVar("ActT")
ObsT = TypeVar("ObsT")


class SyncEnvPool(Generic[ActT, ObsT]):
    """Blocking twin of ``EnvPool``: ``with pool.sync() as p, p.session() as env: env.reset()``."""

    def __init__(self, pool: EnvPool[ActT, ObsT]) -> None:
        self._pool = pool
        self._runner = _LoopThread()

    def _run(self, coro: Any) -> Any:
        return self._runner.run(coro)

    def start(self) -> SyncEnvPool[ActT, ObsT]:
        self._run(self._pool.start())
        return self

    def replicas(self) -> list[ReplicaInfo]:
        return self._pool.replicas()

    def metrics(self, registry: Any = None, *, labels: dict[str, str] | None = None) -> str | None:
        """``EnvPool.metrics``: Prometheus text, or registered into ``registry``."""
        return self._pool.metrics(registry, labels=labels)

    def serve_metrics(self, port: int = 0, *, host: str = "127.0.0.1",
                      token: str | None = None) -> PoolMetricsServer:
        """``EnvPool.serve_metrics``: ``GET /metrics`` on 127.0.0.1 until ``.close()``."""
        return self._pool.serve_metrics(port, host=host, token=token)

    @contextlib.contextmanager
    def session(self) -> Iterator[SyncEnvClient[ActT, ObsT]]:
        """A blocking client (``SyncEnvClient`` surface) on one replica, released on exit."""
        manager = self._pool.session()
        client = self._run(manager.__aenter__())
        sync_client: SyncEnvClient[ActT, ObsT] = _BorrowedSyncClient(client, self._runner)
        try:
            yield sync_client
        except BaseException as exc:
            if not self._run(manager.__aexit__(type(exc), exc, exc.__traceback__)):
                raise
        else:
            self._run(manager.__aexit__(None, None, None))

    def close(self) -> None:
        try:
            self._run(self._pool.close())
        finally:
            self._runner.stop()

    def __enter__(self) -> SyncEnvPool[ActT, ObsT]:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


class _BorrowedSyncClient(SyncEnvClient[ActT, ObsT]):
    """A ``SyncEnvClient`` that runs on the pool's loop thread; ``close()`` ends the session but
    leaves the shared loop running (the pool's ``session()`` releases the slot)."""

    def __init__(self, client: EnvClient[ActT, ObsT], runner: _LoopThread) -> None:
        self._client, self._runner = client, runner

    def close(self) -> None:
        self._run(self._client.close)
