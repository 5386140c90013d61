"""``openenv.core.env_client``: upstream's ``EnvClient`` on top of the kernel's client.

``EnvClient`` is the kernel's ``openenv.client.EnvClient`` (protocol, connectors, typed errors,
no silent reconnects) with upstream's surface:

* upstream's constructor, in upstream's order: ``base_url, connect_timeout_s,
  message_timeout_s, max_message_size_mb, websocket_ping_interval_s, websocket_ping_timeout_s,
  provider, mode, headers`` (kernel options such as ``transport=`` or ``token=`` are also accepted
  as keywords);
* three generic parameters, ``EnvClient[MyAction, MyObservation, MyState]``; the classes named
  there type the default hooks, so a subclass needs no hooks unless its wire format is special;
* the subclass hooks ``_step_payload``, ``_parse_result``, ``_parse_state``, called on every
  reset/step/state;
* upstream's sync/async duality (docs/protocol.md §8.3): ``reset``, ``step``, ``state``, ``connect``,
  ``disconnect`` and ``close`` return a coroutine inside async code that awaits them, and run to
  completion on a private background loop when no event loop is running (scripts call
  ``env.reset()`` directly). Inside a running loop with no mode chosen yet they return a lazy
  result: ``await`` it (async mode) or touch an attribute (sync mode, blocking the caller's loop
  while the background loop does the I/O). The first use fixes the mode; mixing raises
  ``RuntimeError("EnvClient is already being used in <mode> mode. ...")``. ``.sync()`` returns
  the blocking ``SyncEnvClient``;
* ``from_provider(env, provider=...)`` returns upstream's lazy bootstrap handle: ``await`` it for an
  async client, or call ``.sync()`` on it for a ``SyncEnvClient``.

Kept from the kernel on purpose (docs/protocol.md §11 B11, B19): errors are typed ``OpenEnvError``s whose
``str()`` is upstream's ``Server error: <message> (code: <code>)``; after a dropped connection or a
timeout ``step``/``state`` raise ``SessionLostError`` instead of silently starting a new episode
on a new session (``reset()`` reconnects). A client first used on one event loop and then on
another (``asyncio.run`` twice) has lost its socket with the first loop, so the same rule applies.

Not supported: ``from_docker_image`` and ``from_env`` (use ``from_provider``), and upstream's
container/runtime provider objects as ``provider=`` (pass a kernel ``ProviderHandle``, or use
``from_provider``).
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Callable, Coroutine, Generator
from typing import TYPE_CHECKING, Any, Generic, TypeVar, get_args, get_origin

from pydantic import BaseModel

from openenv.client import EnvClient as _KernelEnvClient
from openenv.core._unsupported import refuse
from openenv.core.client_types import StepResult
from openenv.errors import SessionLostError
from openenv.interfaces import ProviderHandle
from openenv.modes import Mode

if TYPE_CHECKING:
    from openenv.core.sync_client import SyncEnvClient

__all__ = ["EnvClient", "StepResult", "UpstreamClientMixin"]

ActT = TypeVar("ActT")
ObsT = TypeVar("ObsT")
StateT = TypeVar("StateT")
ResultT = TypeVar("ResultT")
ClientT = TypeVar("ClientT", bound="_KernelEnvClient[Any, Any]")

_MIXED = ("EnvClient is already being used in {mode} mode. Create a separate client instance when "
          "mixing sync and async code.")


class _LazyResult(Generic[ResultT]):
    """What a public call returns inside a running loop before the client chose sync or async.

    ``await`` it to use the client asynchronously; touching an attribute or ``bool()`` resolves it
    synchronously (on the client's background loop) and fixes sync mode.
    """

    def __init__(self, client: UpstreamClientMixin, factory: Callable[[], Coroutine[Any, Any, ResultT]]) -> None:
        self._client = client
        self._factory = factory
        self._resolved = False
        self._value: ResultT | None = None

    def __await__(self) -> Generator[Any, None, ResultT]:
        if self._resolved:
            raise TypeError("This result was already resolved synchronously; it cannot be awaited too. "
                            "Await the call directly in async code.")
        self._client._claim_execution_mode("async")
        return self._factory().__await__()

    def _sync_value(self) -> ResultT:
        if not self._resolved:
            self._value = self._client._run_sync(self._factory)
            self._resolved = True
        return self._value  # type: ignore[return-value]

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._sync_value(), name)

    def __bool__(self) -> bool:
        return bool(self._sync_value())

    def __repr__(self) -> str:
        return repr(self._value) if self._resolved else f"<{type(self).__name__} pending>"


class _Bootstrap(Coroutine[Any, Any, ClientT]):
    """Upstream's lazy bootstrap handle: ``await h`` → connected async client; ``h.sync()`` → sync client.

    Nothing starts until the handle is resolved, and it resolves once.
    """

    def __init__(self, start: Callable[[], Coroutine[Any, Any, ClientT]]) -> None:
        self._start = start
        self._coro: Coroutine[Any, Any, ClientT] | None = None
        self._used = False

    def _take(self) -> None:
        if self._used:
            raise RuntimeError("This bootstrap handle was already resolved; call from_provider(...) again "
                               "for another server.")
        self._used = True

    def _coroutine(self) -> Coroutine[Any, Any, ClientT]:
        if self._coro is None:
            self._take()

            async def connected() -> ClientT:
                client = await self._start()
                client._claim_execution_mode("async")  # type: ignore[attr-defined]
                return client

            self._coro = connected()
        return self._coro

    def __await__(self) -> Generator[Any, None, ClientT]:
        return self._coroutine().__await__()

    def send(self, value: Any) -> Any:
        return self._coroutine().send(value)

    def throw(self, *args: Any, **kwargs: Any) -> Any:
        return self._coroutine().throw(*args, **kwargs)

    def close(self) -> None:
        if self._coro is not None:
            self._coro.close()

    def sync(self) -> SyncEnvClient[Any, Any, Any]:
        """Start and connect on a private background loop; return the blocking client."""
        from openenv.client import _LoopThread
        from openenv.core.sync_client import SyncEnvClient

        self._take()
        runner = _LoopThread()
        try:
            client = runner.run(self._start())
        except BaseException:
            runner.stop()
            raise
        # The client connected on the runner's loop, which the sync wrapper now owns.
        client._execution_mode = None  # type: ignore[attr-defined]
        wrapper: SyncEnvClient[Any, Any, Any] = SyncEnvClient(client, runner=runner)
        client._sync_client = wrapper  # type: ignore[attr-defined]
        client._claim_execution_mode("sync")  # type: ignore[attr-defined]
        return wrapper

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {'used' if self._used else 'pending'}>"


#: Client constructor arguments ``from_docker_image`` passes to the client, not to the provider.
_CLIENT_KEYS = ("connect_timeout_s", "message_timeout_s", "max_message_size_mb", "websocket_ping_interval_s",
                "websocket_ping_timeout_s", "mode", "headers")


class UpstreamClientMixin:
    """Upstream's client surface over a kernel ``EnvClient`` subclass (put it first in the bases).

    Public operations dispatch to private coroutines (``_reset_async`` …) that call the kernel
    implementation of the next class in the MRO.
    """

    _execution_mode: str | None = None
    _sync_client: SyncEnvClient[Any, Any, Any] | None = None
    _conn_loop: asyncio.AbstractEventLoop | None = None
    # Set by the kernel client this mixin sits on (declared for type checkers only).
    _conn: Any
    _lost: Any
    _children: list[Any]
    _provider: Any
    _extensions: Any

    def __init__(
        self,
        base_url: str | None = None,
        connect_timeout_s: float = 10.0,
        message_timeout_s: float = 60.0,
        max_message_size_mb: float = 100.0,
        websocket_ping_interval_s: float | None = 20.0,
        websocket_ping_timeout_s: float | None = 20.0,
        provider: Any = None,
        mode: str | None = None,
        headers: dict[str, str] | None = None,
        **kernel_options: Any,
    ) -> None:
        owns_provider = False
        if provider is not None and not isinstance(provider, ProviderHandle):
            if hasattr(provider, "start_container") and base_url:
                # Upstream's EnvClient(base_url, provider=p): the client stops p's container on close.
                from openenv.core.containers.adapter import UpstreamProviderHandle

                provider = UpstreamProviderHandle(provider=type(provider).__name__, id=base_url,
                                                  base_url=base_url, upstream=provider, owner=str(os.getpid()))
                owns_provider = True
            elif hasattr(provider, "start"):
                refuse(
                    f"Passing an upstream runtime provider ({type(provider).__name__}) to EnvClient",
                    f"start it first (base_url = provider.start()), then {type(self).__name__}(base_url, "
                    "provider=...); or from_provider(env, provider='local')",
                    "A client is built for a server that is already running",
                )
            else:
                raise TypeError(f"provider must be a started ProviderHandle or an upstream ContainerProvider, "
                                f"got {type(provider).__name__}.")
        if mode is None:
            mode = os.environ.get("OPENENV_CLIENT_MODE") or None
        if mode is not None and mode.lower() not in tuple(Mode):
            raise ValueError(f"Invalid mode: {mode!r}. Use 'simulation' or 'production'.")
        super().__init__(  # type: ignore[call-arg]
            base_url,
            connect_timeout_s=connect_timeout_s,
            message_timeout_s=message_timeout_s,
            max_message_size_mb=max_message_size_mb,
            websocket_ping_interval_s=websocket_ping_interval_s,
            websocket_ping_timeout_s=websocket_ping_timeout_s,
            provider=provider,
            mode=mode.lower() if mode else None,
            headers=headers,
            **kernel_options,
        )
        self._mode = (mode or "simulation").lower()
        if owns_provider:
            self._owns_provider = True
        self._execution_mode = None
        self._sync_client = None
        self._conn_loop = None

    # -- sync/async dispatch (docs/protocol.md §8.3) ----------------------------------------------------------

    def _claim_execution_mode(self, mode: str) -> None:
        """Fix the client to ``"sync"`` or ``"async"`` on first use; refuse mixing later."""
        if self._execution_mode is None:
            self._execution_mode = mode
        elif self._execution_mode != mode:
            raise RuntimeError(_MIXED.format(mode=self._execution_mode))

    def _run_sync(self, factory: Callable[[], Coroutine[Any, Any, ResultT]], *,
                  allow_async_handoff: bool = False) -> ResultT:
        if allow_async_handoff and self._execution_mode == "async":
            # A client awaited under one asyncio.run() and then used from plain code: hand it over.
            self._execution_mode = "sync"
        else:
            self._claim_execution_mode("sync")
        return self.sync()._run_factory(factory)

    def _dispatch(self, factory: Callable[[], Coroutine[Any, Any, ResultT]]) -> Any:
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if self._execution_mode == "sync":
            sync_loop = self._sync_client._loop if self._sync_client is not None else None
            if running is not None and running is sync_loop:
                return factory()  # an operation of the sync wrapper, already on its loop
            return self._run_sync(factory)
        if running is not None:
            if self._execution_mode == "async":
                return factory()
            return _LazyResult(self, factory)
        return self._run_sync(factory, allow_async_handoff=True)

    def _check_loop(self) -> None:
        """A socket opened on another (usually finished) event loop cannot be used here."""
        conn = getattr(self, "_conn", None)
        if conn is None or self._conn_loop is None:
            return
        if self._conn_loop is not asyncio.get_running_loop():
            conn.discard()  # the server ends that session now, not when the socket is collected
            self._conn = None
            self._conn_loop = None
            self._lost = SessionLostError(
                "The client's connection was opened on another event loop, which no longer serves it; "
                "its session and episode are gone. Call reset() to start a new episode."
            )

    # -- public operations ------------------------------------------------------------------------

    def connect(self) -> Any:
        return self._dispatch(self._connect_async)

    def disconnect(self) -> Any:
        return self._dispatch(self._disconnect_async)

    def reset(self, **kwargs: Any) -> Any:
        return self._dispatch(lambda: self._reset_async(**kwargs))

    def step(self, action: Any, **kwargs: Any) -> Any:
        return self._dispatch(lambda: self._step_async(action, **kwargs))

    def state(self) -> Any:
        return self._dispatch(self._state_async)

    def close(self) -> Any:
        result = self._dispatch(self._close_async)
        if not inspect.isawaitable(result) and self._sync_client is not None:
            self._sync_client._stop_loop()  # closed synchronously: release the background thread
        return result

    # -- the coroutines behind them (the kernel's implementations) ---------------------------------

    async def _connect_async(self) -> Any:
        self._check_loop()
        await super().connect()  # type: ignore[misc]
        self._conn_loop = asyncio.get_running_loop()
        return self

    async def _disconnect_async(self) -> None:
        self._check_loop()
        conn, self._conn = self._conn, None
        self._conn_loop = None
        if conn is not None and not conn.closed:
            await conn.close()

    async def _reset_async(self, **kwargs: Any) -> Any:
        self._check_loop()
        return await super().reset(**kwargs)  # type: ignore[misc]

    async def _step_async(self, action: Any, **kwargs: Any) -> Any:
        self._check_loop()
        return await super().step(action, **kwargs)  # type: ignore[misc]

    async def _state_async(self) -> Any:
        self._check_loop()
        return await super().state()  # type: ignore[misc]

    async def _close_async(self) -> None:
        if self._conn_loop is not None and self._conn_loop is not asyncio.get_running_loop():
            if self._conn is not None:
                self._conn.discard()  # its loop is gone: no goodbye, but the server sees the end
            self._conn = None
        self._conn_loop = None
        await super().close()  # type: ignore[misc]

    # -- context managers, sessions, sync twin ----------------------------------------------------

    async def __aenter__(self) -> Any:
        self._claim_execution_mode("async")
        await self._connect_async()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._close_async()

    def __enter__(self) -> Any:
        self._run_sync(self._connect_async)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _create_session_client(self) -> Any:
        """An unconnected client of the same class and settings (another server session)."""
        child = type(self).__new__(type(self))
        child.__dict__.update(self.__dict__)
        child._conn, child._lost, child._children, child._provider = None, None, [], None
        child._extensions = None
        child._execution_mode, child._sync_client, child._conn_loop = None, None, None
        reset_mcp = getattr(child, "_reset_mcp_state", None)  # per-client state of the MCP client
        if callable(reset_mcp):
            reset_mcp()
        return child

    async def new_session(self) -> Any:
        """Connect another client (another server session) on the same server; closed with this one."""
        child = self._create_session_client()
        await child._connect_async()
        child._claim_execution_mode("async")
        self._children.append(child)
        return child

    def sync(self) -> SyncEnvClient[Any, Any, Any]:
        """The blocking wrapper (one per client), running on a private background loop."""
        from openenv.core.sync_client import SyncEnvClient

        if self._sync_client is None:
            self._sync_client = SyncEnvClient(self)  # type: ignore[arg-type]  # a kernel client by MRO
        return self._sync_client

    # -- bootstrap --------------------------------------------------------------------------------

    @classmethod
    def from_provider(cls, env: str, provider: str | None = None, **kwargs: Any) -> Any:  # type: ignore[override]
        """Start ``env`` through a provider plugin; ``await`` the handle or call ``.sync()`` on it."""

        async def start() -> Any:
            return await _KernelEnvClient.from_provider.__func__(cls, env, provider, **kwargs)  # type: ignore[attr-defined]

        return _Bootstrap(start)

    @classmethod
    def from_docker_image(cls, image: str, provider: Any = None, **kwargs: Any) -> Any:
        """Start ``image`` and connect (upstream's bootstrap): ``await`` the handle or call ``.sync()``.

        ``provider``: ``None`` runs the image on our ``docker`` provider plugin; an upstream
        ``ContainerProvider`` instance (e.g. ``SpritesProvider(...)``) is driven as upstream does
        (``start_container(image, **kwargs)``, ``wait_for_ready``, ``stop_container`` on close);
        a string names a provider plugin (``openenv providers list``). ``wait_timeout`` (seconds)
        bounds the start.
        """
        wait_timeout = float(kwargs.pop("wait_timeout", 60.0))
        client_kwargs = {key: kwargs.pop(key) for key in _CLIENT_KEYS if key in kwargs}
        if provider is None or isinstance(provider, str):
            from openenv.interfaces import LaunchSpec

            env_vars = dict(kwargs.pop("env_vars", None) or {})
            spec = LaunchSpec(env=image, image=image, env_vars=env_vars, startup_timeout_s=wait_timeout,
                              options=kwargs)
            return cls.from_provider(image, provider or "docker", launch=spec, **client_kwargs)
        if not hasattr(provider, "start_container"):
            raise TypeError(f"provider must be a ContainerProvider instance or a provider name, got "
                            f"{type(provider).__name__}. See `openenv providers list`.")

        async def start() -> Any:
            from openenv.core.containers.adapter import UpstreamProviderHandle

            def launch() -> UpstreamProviderHandle:
                try:
                    base_url = provider.start_container(image, **kwargs)
                    handle = UpstreamProviderHandle(provider=type(provider).__name__, id=image,
                                                    base_url=str(base_url).rstrip("/"), upstream=provider,
                                                    owner=str(os.getpid()))
                    provider.wait_for_ready(handle.base_url, timeout_s=wait_timeout)
                    return handle
                except BaseException:
                    provider.stop_container()  # as upstream: a failed start releases the container
                    raise

            handle = await asyncio.to_thread(launch)
            try:
                client = cls(handle.base_url, provider=handle, **client_kwargs)
                client._owns_provider = True  # type: ignore[attr-defined]
                await client._connect_async()
                return client
            except BaseException:
                await asyncio.to_thread(handle.stop)
                raise

        return _Bootstrap(start)

    @classmethod
    def from_env(cls, repo_id: str, use_docker: bool = True, provider: Any = None, **kwargs: Any) -> Any:
        refuse(
            f"`{cls.__name__}.from_env`",
            f"`{cls.__name__}.from_provider(env, provider='docker')` for an installed env, or "
            f"`{cls.__name__}(base_url='https://<space>.hf.space')` for a running Hugging Face Space",
            "Hub downloads and Space bootstrapping are not built in",
        )


class EnvClient(UpstreamClientMixin, _KernelEnvClient[ActT, ObsT], Generic[ActT, ObsT, StateT]):
    """Upstream's async-by-default client for one server session (see the module docstring).

    Subclass it as upstream's template does::

        class MyEnv(EnvClient[MyAction, MyObservation, State]):
            def _step_payload(self, action): return {"message": action.message}
            def _parse_result(self, payload): return StepResult(...)
            def _parse_state(self, payload): return State(**payload)
    """

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        for base in getattr(cls, "__orig_bases__", ()):
            origin = get_origin(base)
            if not (isinstance(origin, type) and issubclass(origin, _KernelEnvClient)):
                continue
            args = get_args(base)
            for attr, arg in zip(("action_type", "observation_type", "state_type"), args, strict=False):
                if isinstance(arg, type) and issubclass(arg, BaseModel) and attr not in cls.__dict__:
                    setattr(cls, attr, arg)
            break
