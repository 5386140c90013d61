"""``openenv.core.sync_client``: upstream's ``SyncEnvClient`` (a blocking wrapper of an async client).

``SyncEnvClient(async_client)`` (or ``async_client.sync()``) runs every operation of the wrapped
client on one private background event loop, so the connection stays bound to a single loop.
Coroutine methods the wrapped client adds (``list_tools``, ``call_tool`` …) become blocking calls.
The loop thread starts on first use, stops on ``close()`` and starts again if the client is used
after that.

It is a subclass of the kernel's ``openenv.client.SyncEnvClient``; the constructor differs: it
takes the async client only (upstream's signature), not a URL.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, Generic, TypeVar

from openenv.client import EnvClient as _KernelEnvClient

# From the defining module: ``openenv.client`` re-exports these lazily (a module ``__getattr__``),
# which type checkers see as variables, not classes.
from openenv.client_sync import SyncEnvClient as _KernelSyncEnvClient
from openenv.client_sync import _LoopThread
from openenv.core.client_types import StepResult

__all__ = ["SyncEnvClient"]

ActT = TypeVar("ActT")
ObsT = TypeVar("ObsT")
StateT = TypeVar("StateT")
T = TypeVar("T")


class SyncEnvClient(_KernelSyncEnvClient[ActT, ObsT], Generic[ActT, ObsT, StateT]):
    """Blocking client: ``with MyEnv(base_url=url).sync() as env: env.reset(); env.step(a)``."""

    def __init__(self, async_client: _KernelEnvClient[ActT, ObsT], *, runner: _LoopThread | None = None) -> None:
        if not isinstance(async_client, _KernelEnvClient):
            raise TypeError(
                f"SyncEnvClient wraps an EnvClient instance, got {type(async_client).__name__}. Use "
                "MyEnv(base_url=...).sync() or SyncEnvClient(MyEnv(base_url=...))."
            )
        self._client = async_client
        self._runner: _LoopThread | None = runner  # type: ignore[assignment]  # lazy here
        self._children: list[SyncEnvClient[Any, Any, Any]] = []
        self._wrappers: dict[str, Callable[..., Any]] = {}

    # -- the loop -------------------------------------------------------------------------------

    @property
    def _async(self) -> _KernelEnvClient[ActT, ObsT]:
        return self._client

    @property
    def async_client(self) -> _KernelEnvClient[ActT, ObsT]:
        """The wrapped async client."""
        return self._client

    @property
    def _loop(self) -> asyncio.AbstractEventLoop | None:
        runner = self._runner
        return runner.loop if runner is not None and not runner.loop.is_closed() else None

    def _ensure_runner(self) -> _LoopThread:
        runner = self._runner
        if runner is None or runner.loop.is_closed():
            runner = self._runner = _LoopThread()
        return runner

    def _claim(self) -> None:
        claim = getattr(self._client, "_claim_execution_mode", None)
        if claim is not None:
            claim("sync")
        if getattr(self._client, "_sync_client", self) is None:
            self._client._sync_client = self  # type: ignore[attr-defined]

    def _run_factory(self, factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
        self._claim()
        runner = self._ensure_runner()

        async def call() -> T:
            return await factory()

        return runner.run(call())

    def _run(self, coro: Any) -> Any:  # type: ignore[override]
        """Run a coroutine (or a zero-argument coroutine function) on the background loop."""
        if callable(coro) and not asyncio.iscoroutine(coro):
            return self._run_factory(coro)
        try:
            self._claim()
        except BaseException:
            coro.close()
            raise
        return self._ensure_runner().run(coro)

    def _stop_loop(self) -> None:
        runner, self._runner = self._runner, None  # type: ignore[assignment]
        if runner is not None:
            runner.stop()

    def _op(self, name: str) -> Callable[..., Any]:
        """The wrapped client's coroutine for ``name`` (upstream-style private one when it has it)."""
        return getattr(self._client, f"_{name}_async", None) or getattr(self._client, name)

    # -- operations -----------------------------------------------------------------------------

    def connect(self) -> SyncEnvClient[ActT, ObsT, StateT]:
        self._run_factory(self._op("connect"))
        return self

    def disconnect(self) -> None:
        self._run_factory(self._op("disconnect"))

    def reconnect(self) -> SyncEnvClient[ActT, ObsT, StateT]:
        self._run_factory(self._client.reconnect)
        return self

    def reset(self, **kwargs: Any) -> StepResult[ObsT]:
        return self._run_factory(lambda: self._op("reset")(**kwargs))  # type: ignore[no-any-return]

    def step(self, action: Any, **kwargs: Any) -> StepResult[ObsT]:
        return self._run_factory(lambda: self._op("step")(action, **kwargs))  # type: ignore[no-any-return]

    def state(self) -> Any:
        return self._run_factory(self._op("state"))

    def close(self) -> None:
        """Close child sessions, then this client (and its provider), then the loop thread."""
        try:
            for child in list(self._children):
                try:
                    child.close()
                except Exception:
                    pass
            self._children.clear()
            self._run_factory(self._op("close"))
        finally:
            self._stop_loop()

    def new_session(self) -> SyncEnvClient[Any, Any, Any]:
        """Another blocking client (another server session) on the same server; closed with this one."""
        make = getattr(self._client, "_create_session_client", None)
        if make is None:
            raise TypeError(f"{type(self._client).__name__} cannot open sibling sessions.")
        child: SyncEnvClient[Any, Any, Any] = SyncEnvClient(make())
        child.connect()
        self._children.append(child)
        return child

    def __enter__(self) -> SyncEnvClient[ActT, ObsT, StateT]:
        return self.connect()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self._stop_loop()
        except Exception:
            pass

    def __getattr__(self, name: str) -> Any:
        # Coroutine methods of the wrapped client (list_tools, call_tool …) become blocking calls.
        if name.startswith("__") or name in ("_client", "_runner", "_wrappers", "_children"):
            raise AttributeError(name)
        attr = getattr(self._client, name)
        if not asyncio.iscoroutinefunction(attr):
            return attr
        wrapper = self._wrappers.get(name)
        if wrapper is None:

            def wrapper(*args: Any, **kwargs: Any) -> Any:
                return self._run_factory(lambda: getattr(self._client, name)(*args, **kwargs))

            self._wrappers[name] = wrapper
        return wrapper

    # upstream exposes the hooks on the wrapper too
    def _step_payload(self, action: Any) -> dict[str, Any]:
        return self._client._step_payload(action)  # type: ignore[arg-type]

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[ObsT]:
        return self._client._parse_result(payload)

    def _parse_state(self, payload: dict[str, Any]) -> Any:
        return self._client._parse_state(payload)
