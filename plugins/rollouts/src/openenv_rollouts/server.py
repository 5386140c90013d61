"""The env server a collection runs against: started through a provider (restarted when it dies),
or an already-served URL (which cannot be restarted)."""

from __future__ import annotations

import asyncio
import secrets
from typing import TYPE_CHECKING, Any

from openenv.errors import ConfigError

if TYPE_CHECKING:
    from openenv.interfaces import ProviderHandle

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
        self._lock = asyncio.Lock()

    @classmethod
    async def start(cls, env: str, *, provider: str | None = None, max_sessions: int = 8,
                    startup_timeout_s: float = 120.0) -> EnvServer:
        from openenv.interfaces import LaunchSpec
        from openenv.plugins import get_plugin_manager

        pm = get_plugin_manager()
        name = pm.choose_provider(env, provider)
        provider_obj = pm.catalog.providers.load(name)()
        token = secrets.token_urlsafe(24)
        spec = LaunchSpec(env=env, max_sessions=max_sessions, token=token, startup_timeout_s=startup_timeout_s)
        handle = await asyncio.to_thread(provider_obj.start, spec)
        return cls(env, base_url=handle.base_url, token=token, provider=name, handle=handle, spec=spec,
                   provider_obj=provider_obj)

    @classmethod
    def attach(cls, env: str, base_url: str, token: str | None = None) -> EnvServer:
        return cls(env, base_url=base_url, token=token)

    @property
    def restartable(self) -> bool:
        return self.handle is not None

    def alive(self) -> bool:
        return self.handle is None or self.handle.is_running()

    async def recover(self, seen_generation: int) -> bool:
        """Restart the server if it died (once per generation). False when it cannot be restarted."""
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
        if self.handle is not None:
            await asyncio.to_thread(self.handle.stop)
