"""The env server a collection runs against: started through a provider (restarted when it dies),
an already-served URL (which cannot be restarted), or ``replicas`` servers behind an ``EnvPool``
(``start_pool``: sessions spread over them, a dead one replaced by the pool)."""

from __future__ import annotations

import asyncio
import os
import secrets
from typing import TYPE_CHECKING, Any

from openenv.errors import ConfigError

if TYPE_CHECKING:
    from openenv.interfaces import ProviderHandle
    from openenv.pool import EnvPool
    from openenv.pool_metrics import PoolMetricsServer

__all__ = ["EnvServer"]


class EnvServer:
    """``await EnvServer.start(env, provider=None, max_sessions=8)`` or ``EnvServer.attach(url)``.

    ``generation`` counts (re)starts; ``recover(seen)`` restarts the server once for every worker
    that saw generation ``seen`` fail (the first caller restarts, the others wait and reuse it).
    """

    def __init__(self, env: str, *, base_url: str, token: str | None, provider: str | None = None,
                 handle: ProviderHandle | None = None, spec: Any = None, provider_obj: Any = None) -> None:
        self.env, self.base_url, self.token, self.provider = env, base_url, token, provider
        self.handle, self._spec, self._provider_obj = handle, spec, provider_obj
        self.generation = 0
        self.restarts = 0
        self.pool: EnvPool[Any, Any] | None = None
        #: The pool's ``/metrics`` endpoint (``start_pool(metrics_port=...)``), closed by ``stop``.
        self.metrics: PoolMetricsServer | None = None
        self._lock = asyncio.Lock()

    @classmethod
    async def start(cls, env: str, *, provider: str | None = None, max_sessions: int = 8,
                    startup_timeout_s: float = 120.0, options: dict[str, Any] | None = None,
                    env_vars: dict[str, str] | None = None) -> EnvServer:
        from openenv.interfaces import LaunchSpec
        from openenv.plugins import get_plugin_manager

        pm = get_plugin_manager()
        name = pm.choose_provider(env, provider)
        provider_obj = pm.catalog.providers.load(name)()
        token = secrets.token_urlsafe(24)
        spec = LaunchSpec(env=env, max_sessions=max_sessions, token=token, startup_timeout_s=startup_timeout_s,
                          options=dict(options or {}), env_vars=dict(env_vars or {}))
        handle = await asyncio.to_thread(provider_obj.start, spec)
        return cls(env, base_url=handle.base_url, token=token, provider=name, handle=handle, spec=spec,
                   provider_obj=provider_obj)

    @classmethod
    async def start_pool(cls, env: str, *, replicas: int, provider: str | None = None, max_sessions: int = 8,
                         startup_timeout_s: float = 120.0, transport: str | None = None,
                         options: dict[str, Any] | None = None, env_vars: dict[str, str] | None = None,
                         metrics_port: int | None = None) -> EnvServer:
        """``replicas`` servers of ``env`` behind one ``EnvPool``, each holding ``max_sessions``;
        with ``metrics_port`` the pool's metrics are served at ``http://127.0.0.1:PORT/metrics``
        (a scrape sends ``OPENENV_TOKEN`` as a bearer token when that is set)."""
        from openenv.interfaces import LaunchSpec
        from openenv.plugins import get_plugin_manager
        from openenv.pool import EnvPool

        name = get_plugin_manager().choose_provider(env, provider)
        token = secrets.token_urlsafe(24)
        spec = LaunchSpec(env=env, max_sessions=max_sessions, token=token, startup_timeout_s=startup_timeout_s,
                          options=dict(options or {}), env_vars=dict(env_vars or {}))
        pool: EnvPool[Any, Any] = EnvPool(provider=name, replicas=replicas, launch=spec, transport=transport)
        await pool.start()
        server = cls(env, base_url=pool.replicas()[0].url, token=token, provider=name)
        server.pool = pool
        if metrics_port is not None:
            from openenv.pool_metrics import serve_pool_metrics

            try:
                # Not the replicas' token: that one is this run's secret, which no scraper knows.
                server.metrics = serve_pool_metrics(pool, metrics_port,
                                                    token=os.environ.get("OPENENV_TOKEN") or None)
            except BaseException:
                await pool.close()
                raise
        return server

    @classmethod
    def attach(cls, env: str, base_url: str, token: str | None = None) -> EnvServer:
        return cls(env, base_url=base_url, token=token)

    @property
    def restartable(self) -> bool:
        return self.handle is not None or self.pool is not None

    def alive(self) -> bool:
        return self.handle is None or self.handle.is_running()

    async def connect(self, transport: str | None) -> Any:
        """A connected client: a pool session (on the least-loaded replica), or one on the server."""
        if self.pool is not None:
            return await self.pool.acquire()
        from openenv.client import GenericEnvClient

        return await GenericEnvClient(self.base_url, token=self.token, transport=transport).connect()

    async def release(self, client: Any) -> None:
        """Close a client from ``connect`` (a pool session gives its slot back)."""
        if client is None:
            return
        try:
            if self.pool is not None:
                await self.pool.release(client)
            else:
                await client.close()
        except Exception:
            pass  # the connection is broken already

    async def recover(self, seen_generation: int) -> bool:
        """Restart the server if it died (once per generation). False when it cannot be restarted.

        With a pool there is nothing to wait for: the pool marked the dead replica down, places the
        retry on another one and replaces the dead one itself."""
        if self.pool is not None:
            self.restarts = self.pool.replacements
            return True
        async with self._lock:
            if self.generation != seen_generation:
                return True  # another worker restarted it already
            if self.handle is None:
                return False
            # a server that broke a connection but is still up is kept (the episode is retried)
            for _ in range(20):
                if not self.handle.is_running():
                    break
                await asyncio.sleep(0.05)
            if self.handle.is_running():
                self.generation += 1
                return True
            await asyncio.to_thread(self.handle.stop)
            try:
                self.handle = await asyncio.to_thread(self._provider_obj.start, self._spec)
            except Exception as exc:
                raise ConfigError(f"could not restart env '{self.env}' with provider '{self.provider}': "
                                  f"{exc}") from exc
            handle = self.handle
            assert handle is not None
            self.base_url = handle.base_url
            self.generation += 1
            self.restarts += 1
            return True

    def logs(self, tail: int = 20) -> str:
        return self.handle.logs(tail) if self.handle is not None else ""

    async def stop(self) -> None:
        if self.metrics is not None:
            self.metrics.close()
        if self.pool is not None:
            self.restarts = self.pool.replacements
            await self.pool.close()
        if self.handle is not None:
            await asyncio.to_thread(self.handle.stop)
