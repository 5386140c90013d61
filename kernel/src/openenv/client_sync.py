"""Blocking twins of the async client: ``SyncEnvClient`` and ``SyncVectorEnv``.

Each runs its async counterpart on a private event loop on a daemon thread (``_LoopThread``); a
call submits the coroutine and waits for its result.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

from openenv.client import EnvClient
from openenv.client_vector import VectorEnv
from openenv.tasks import Split, Task
from openenv.types import StepResult

log = logging.getLogger("openenv.client")

__all__ = ["SyncEnvClient", "SyncVectorEnv"]

ActT = TypeVar("ActT")
ObsT = TypeVar("ObsT")
_T = TypeVar("_T")


class _LoopThread:
    """A private event loop on a daemon thread; coroutines are submitted to it and awaited."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="openenv-client-loop", daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, _T], timeout: float | None = None) -> _T:
        """Run ``coro`` on the loop and wait for it; past ``timeout`` it is cancelled and
        ``TimeoutError`` raised."""
        fut: Future[_T] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return fut.result(timeout)
        except TimeoutError:
            fut.cancel()
            raise

    def stop(self) -> None:
        if self.loop.is_running():
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(timeout=5)
        if not self.loop.is_running():
            self.loop.close()


class SyncEnvClient(Generic[ActT, ObsT]):
    """Blocking client with the same surface as ``EnvClient``.

    Build it from an async client (``EnvClient(...).sync()``) or directly with ``EnvClient``'s
    arguments: ``SyncEnvClient("http://127.0.0.1:8000", action_type=...)``.
    """

    #: The longest ``close()`` waits for the connection to close politely.
    CLOSE_TIMEOUT_S: float = 10.0

    def __init__(self, client: EnvClient[ActT, ObsT] | str | None = None, **kwargs: Any) -> None:
        if not isinstance(client, EnvClient):
            client = EnvClient(client, **kwargs)
        self._client: EnvClient[ActT, ObsT] = client
        self._runner = _LoopThread()

    @property
    def client(self) -> EnvClient[ActT, ObsT]:
        """The wrapped async client."""
        return self._client

    @property
    def base_url(self) -> str:
        return self._client.base_url

    def _run(self, fn: Callable[[], Awaitable[_T]]) -> _T:
        async def call() -> _T:
            return await fn()

        return self._runner.run(call())

    def connect(self) -> SyncEnvClient[ActT, ObsT]:
        self._run(self._client.connect)
        return self

    def reconnect(self) -> SyncEnvClient[ActT, ObsT]:
        self._run(self._client.reconnect)
        return self

    def reset(self, **kwargs: Any) -> StepResult[ObsT]:
        return self._run(lambda: self._client.reset(**kwargs))

    def step(self, action: ActT | dict[str, Any], **kwargs: Any) -> StepResult[ObsT]:
        return self._run(lambda: self._client.step(action, **kwargs))

    def step_batch(self, actions: list[ActT | dict[str, Any]]) -> list[StepResult[ObsT]]:
        return self._run(lambda: self._client.step_batch(actions))

    def state(self) -> Any:
        return self._run(self._client.state)

    def vector(self, n: int) -> SyncVectorEnv[ActT, ObsT]:
        """``n`` sessions over this client's connection (see ``EnvClient.vector``)."""
        return SyncVectorEnv(self._runner.run(self._client.vector(n)), self._runner)

    def extensions(self) -> set[str]:
        return self._run(self._client.extensions)

    def splits(self) -> list[Split]:
        return self._run(self._client.splits)

    def tasks(self, split: str, start: int | None = None, stop: int | None = None) -> list[Task]:
        return self._run(lambda: self._client.tasks(split, start, stop))

    def num_tasks(self, split: str) -> int:
        return self._run(lambda: self._client.num_tasks(split))

    def task(self, task_id: str) -> Task:
        return self._run(lambda: self._client.task(task_id))

    def snapshot(self) -> dict[str, Any]:
        return self._run(self._client.snapshot)

    def restore(self, snapshot: dict[str, Any]) -> StepResult[ObsT]:
        return self._run(lambda: self._client.restore(snapshot))

    def fork(self, into: SyncEnvClient[Any, Any] | None = None) -> tuple[SyncEnvClient[Any, Any], StepResult[Any]]:
        """A new session continuing this one's episode (see ``EnvClient.fork``): in ``into``, or in
        a new client of the same server (close it yourself, or use it as a context manager)."""
        target: SyncEnvClient[Any, Any] = into if into is not None else SyncEnvClient(self._client.unconnected_copy())
        return target, target.restore(self.snapshot())

    def close(self) -> None:
        """Close the connection politely, waiting at most ``CLOSE_TIMEOUT_S``; past that it is
        dropped. Bounded because a close can follow an interrupted call (Ctrl-C or SIGTERM turned
        into an exception in the main thread) that left the loop unable to answer, and a cleanup
        must never hang on it."""
        try:
            self._runner.run(self._client.close(), timeout=self.CLOSE_TIMEOUT_S)
        except TimeoutError:
            log.warning("the client's connection did not close within %.0f s; dropped", self.CLOSE_TIMEOUT_S)
        finally:
            self._runner.stop()

    def __enter__(self) -> SyncEnvClient[ActT, ObsT]:
        return self.connect()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        # Extra coroutine methods of subclasses (list_tools, call_tool…) become blocking calls.
        attr = getattr(self._client, name)
        if asyncio.iscoroutinefunction(attr):
            return lambda *a, **kw: self._runner.run(attr(*a, **kw))
        return attr

    @classmethod
    def from_provider(cls, env: str, provider: str | None = None, **kwargs: Any) -> SyncEnvClient[Any, Any]:
        runner = _LoopThread()
        try:
            client: EnvClient[Any, Any] = runner.run(EnvClient.from_provider(env, provider, **kwargs))
        except BaseException:
            runner.stop()
            raise
        sync = cls.__new__(cls)
        sync._client, sync._runner = client, runner
        return sync


class SyncVectorEnv(Generic[ActT, ObsT]):
    """Blocking twin of ``VectorEnv``, from ``SyncEnvClient.vector(n)``."""

    def __init__(self, vec: VectorEnv[ActT, ObsT], runner: _LoopThread) -> None:
        self._vec, self._runner = vec, runner

    @property
    def session_ids(self) -> list[str]:
        return self._vec.session_ids

    def __len__(self) -> int:
        return len(self._vec)

    def reset(self, **kwargs: Any) -> list[StepResult[ObsT]]:
        return self._runner.run(self._vec.reset(**kwargs))

    def reset_at(self, index: int, **kwargs: Any) -> StepResult[ObsT]:
        return self._runner.run(self._vec.reset_at(index, **kwargs))

    def step(self, actions: list[ActT | dict[str, Any]]) -> list[StepResult[ObsT]]:
        return self._runner.run(self._vec.step(actions))

    def step_some(self, indices: list[int], actions: list[ActT | dict[str, Any]]) -> list[StepResult[ObsT]]:
        return self._runner.run(self._vec.step_some(indices, actions))

    def state(self) -> list[Any]:
        return self._runner.run(self._vec.state())

    def close(self) -> None:
        self._runner.run(self._vec.close())

    def __enter__(self) -> SyncVectorEnv[ActT, ObsT]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
