"""The client: ``EnvClient`` (async), its sync twin ``SyncEnvClient``, and ``GenericEnvClient``.

One client = one server session. The protocol logic lives here; moving frames is the job of a
connector from a transport plugin (WebSocket by default, HTTP with ``transport="rest"``).

Promises beyond upstream's client (docs/protocol.md §11 B2, B11, B19):

* Errors are typed (``CapacityError``, ``ValidationError`` with ``.errors`` …) and keep every field
  the server sent; ``str(error)`` keeps upstream's ``Server error: <message> (code: <code>)``.
* After a dropped connection or a timeout the client never silently opens a new session (that
  would be a fresh env mid-episode): ``step``/``state`` raise ``SessionLostError``; ``reset()``
  or ``reconnect()`` start over explicitly.
* ``step(action, timeout_s=5)`` sends step arguments only to servers that negotiated them, and
  raises instead of dropping them otherwise.
* ``step_batch(actions)`` sends many steps in one frame to servers that negotiated ``step_batch``
  (docs/protocol.md §12), and raises ``ConfigError`` otherwise; an action that fails raises its typed error
  with the results of the actions before it as ``err.partial_results``.
* ``vector(n)`` drives ``n`` sessions over one connection (extension ``sessions``): one frame
  carries a step for every session, for policies that act on a batch of envs at once.
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import Future
from typing import Any, ClassVar, Generic, TypeVar
from urllib.parse import urlsplit

from pydantic import BaseModel

from openenv.errors import (
    ConfigError,
    OpenEnvError,
    ProtocolError,
    SessionLostError,
    error_from_wire,
)
from openenv.interfaces import ClientConnector, Connection, ConnectOptions, LaunchSpec, ProviderHandle
from openenv.types import State, StepResult

__all__ = ["EnvClient", "GenericEnvClient", "SyncEnvClient", "SyncVectorEnv", "VectorEnv"]

ActT = TypeVar("ActT")
ObsT = TypeVar("ObsT")
_FATAL_CODES = frozenset({"CAPACITY_REACHED", "FACTORY_ERROR", "SESSION_ERROR"})
_T = TypeVar("_T")


def _resolve_connector(base_url: str, transport: str | None) -> ClientConnector:
    """Pick the connector of ``transport`` (or the first installed one that speaks the URL's scheme)."""
    from openenv.plugins import get_plugin_manager

    registry = get_plugin_manager().catalog.transports
    scheme = urlsplit(base_url).scheme or "ws"
    candidates = [e for e in registry if e.extra.get("client")]
    if transport is not None:
        entry = registry.get(transport)
        if not entry.extra.get("client"):
            raise ConfigError(f"Transport '{transport}' has no client connector.")
        candidates = [entry]
    else:
        # The WebSocket transport is the reference protocol; prefer it when installed.
        candidates.sort(key=lambda e: (e.name != "ws", e.name))
    for entry in candidates:
        if scheme in entry.extra.get("schemes", ()):
            from openenv.registry import load_ref

            return load_ref(entry.extra["client"])()  # type: ignore[no-any-return]
    installed = ", ".join(e.name for e in candidates) or "none"
    raise ConfigError(
        f"No installed transport can connect to '{base_url}' (scheme '{scheme}'; client transports "
        f"installed: {installed}). Install one, e.g. `pip install openenvkit-transport-ws`."
    )


class EnvClient(Generic[ActT, ObsT]):
    """Async client for one session of an env server.

    ``base_url`` may be ``http(s)://`` or ``ws(s)://``, with an optional path prefix. Set the env's
    types with ``action_type=`` / ``observation_type=`` / ``state_type=`` (or as class attributes
    of a subclass) to get typed observations; without them results are dicts.
    """

    action_type: ClassVar[type[BaseModel] | None] = None
    observation_type: ClassVar[type[BaseModel] | None] = None
    state_type: ClassVar[type[BaseModel] | None] = None

    def __init__(
        self,
        base_url: str | None = None,
        *,
        action_type: type[BaseModel] | None = None,
        observation_type: type[BaseModel] | None = None,
        state_type: type[BaseModel] | None = None,
        transport: str | None = None,
        connector: ClientConnector | None = None,
        connect_timeout_s: float = 10.0,
        message_timeout_s: float | None = 60.0,
        max_message_size_mb: float = 100.0,
        websocket_ping_interval_s: float | None = 20.0,
        websocket_ping_timeout_s: float | None = 20.0,
        headers: dict[str, str] | None = None,
        token: str | None = None,
        session_id: str | None = None,
        provider: ProviderHandle | None = None,
        mode: str | None = None,
    ) -> None:
        if base_url is None and provider is None:
            raise ConfigError("EnvClient needs base_url=... (or a started provider handle).")
        if mode is not None and mode.lower() not in ("simulation", "production"):
            raise ConfigError(f"Invalid mode: {mode!r}. Use 'simulation' or 'production'.")
        self._base_url = base_url if base_url is not None else provider.base_url  # type: ignore[union-attr]
        if urlsplit(self._base_url).query:
            raise ConfigError(
                f"base_url must not contain a query string: {self._base_url!r}. Pass the server's "
                "root URL (e.g. 'http://host:8000' or 'https://host/prefix')."
            )
        if action_type is not None:
            self.action_type = action_type  # type: ignore[misc]
        if observation_type is not None:
            self.observation_type = observation_type  # type: ignore[misc]
        if state_type is not None:
            self.state_type = state_type  # type: ignore[misc]
        elif self.state_type is None and self.observation_type is not None:
            # A typed client gets a typed state too: the base State keeps extra keys.
            self.state_type = State  # type: ignore[misc]
        hdrs = dict(headers or {})
        if token:
            hdrs["Authorization"] = f"Bearer {token}"
        self._options = ConnectOptions(
            headers=hdrs,
            connect_timeout_s=connect_timeout_s,
            message_timeout_s=message_timeout_s,
            max_message_bytes=int(max_message_size_mb * 1024 * 1024),
            ping_interval_s=websocket_ping_interval_s,
            ping_timeout_s=websocket_ping_timeout_s,
            session_id=session_id,
        )
        self._transport = transport
        self._connector = connector
        self._conn: Connection | None = None
        self._lost: BaseException | None = None
        self._provider = provider
        self._extensions: set[str] | None = None
        self._max_batch: int | None = None
        self._children: list[EnvClient[Any, Any]] = []
        self._lock: asyncio.Lock | None = None
        self._session_id: str | None = None

    # -- connection -------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return self._base_url

    @property
    def connected(self) -> bool:
        return self._conn is not None and not self._conn.closed and self._lost is None

    async def connect(self) -> EnvClient[ActT, ObsT]:
        """Open the connection (and so the server session). Called lazily by the first operation."""
        if self._conn is not None and not self._conn.closed and self._lost is None:
            return self
        if self._connector is None:
            self._connector = _resolve_connector(self._base_url, self._transport)
        self._conn = await self._connector.connect(self._base_url, self._options)
        self._lost = None
        self._extensions = None
        return self

    async def reconnect(self) -> EnvClient[ActT, ObsT]:
        """Drop the current session (if any) and open a new one. The old episode is gone."""
        await self._drop()
        return await self.connect()

    async def _drop(self) -> None:
        conn, self._conn = self._conn, None
        self._lost = None
        if conn is not None:
            try:
                await conn.abort()
            except Exception:
                pass

    async def close(self) -> None:
        """End the session gracefully, then stop the provider's server if this client started it."""
        for child in self._children:
            await child.close()
        self._children.clear()
        conn, self._conn = self._conn, None
        try:
            if conn is not None and not conn.closed:
                await conn.close()
        finally:
            provider, self._provider = self._provider, None
            if provider is not None and getattr(self, "_owns_provider", False):
                await asyncio.to_thread(provider.stop)

    async def __aenter__(self) -> EnvClient[ActT, ObsT]:
        return await self.connect()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- requests ---------------------------------------------------------------------------------

    async def _request(self, frame: dict[str, Any], *, opens_session: bool = False,
                       primary: bool = True) -> dict[str, Any]:
        if self._lost is not None:
            if not opens_session:
                raise SessionLostError(
                    f"The connection to {self._base_url} was lost ({self._lost}); the session and its "
                    "episode are gone. Call reset() to start a new episode on a new session, or "
                    "reconnect() explicitly.",
                    data={"cause": str(self._lost)},
                )
            await self._drop()
        if self._conn is None or self._conn.closed:
            if self._conn is not None and not opens_session:
                self._lost = SessionLostError("connection closed")
                return await self._request(frame)
            await self.connect()
        conn = self._conn
        assert conn is not None
        if self._lock is None:
            self._lock = asyncio.Lock()
        try:
            # One request at a time per connection: replies come in order, and a VectorEnv's
            # sessions share this client's connection with its own calls.
            async with self._lock:
                reply = await conn.request(frame)
        except OpenEnvError as exc:
            if isinstance(exc, SessionLostError) or exc.code == "TIMEOUT":
                self._lost = exc
            raise
        except (ConnectionError, OSError) as exc:
            self._lost = exc
            raise SessionLostError(
                f"The connection to {self._base_url} dropped: {exc}. The session and its episode "
                "are gone; call reset() to start over.",
            ) from exc
        kind = reply.get("type")
        if kind == "error":
            err = error_from_wire(reply.get("data"))
            # An error about another session of a multiplexed connection (VectorEnv) leaves the
            # connection and this client's own session alone.
            if err.code in _FATAL_CODES and primary:
                self._lost = err
                try:
                    await conn.abort()
                except Exception:
                    pass
            raise err
        return reply

    async def reset(self, **kwargs: Any) -> StepResult[ObsT]:
        """Start a new episode. After a lost connection this opens a new session."""
        reply = await self._request({"type": "reset", "data": kwargs}, opens_session=True)
        return self._parse_result(_expect(reply, "observation"))

    async def step(self, action: ActT | dict[str, Any], **kwargs: Any) -> StepResult[ObsT]:
        """Apply an action. ``kwargs`` (e.g. ``timeout_s``) need a server that negotiated them."""
        frame: dict[str, Any] = {"type": "step", "data": self._step_payload(action)}  # type: ignore[arg-type]
        if kwargs:
            await self._require_extension("step_kwargs", "step arguments " + ", ".join(sorted(kwargs)))
            frame["kwargs"] = kwargs
        reply = await self._request(frame)
        return self._parse_result(_expect(reply, "observation"))

    async def step_batch(self, actions: list[ActT | dict[str, Any]]) -> list[StepResult[ObsT]]:
        """Apply ``actions`` in order in as few frames as the server allows (docs/protocol.md §12 "Batched steps").

        Stops after the first result with ``done``, so the list may be shorter than ``actions``.
        If an action fails, its typed error is raised with the results before it attached as
        ``err.partial_results``; the session survives, as after a failed ``step``. Needs a server
        that grants the ``step_batch`` extension (``ConfigError`` otherwise).
        """
        await self._require_extension(
            "step_batch", "batched steps",
            hint="Call step(action) once per action instead.")
        payloads = [self._step_payload(a) for a in actions]
        chunk = self._max_batch or len(payloads) or 1
        results: list[StepResult[ObsT]] = []
        for start in range(0, len(payloads), chunk):
            reply = await self._request(
                {"type": "step_batch", "data": {"actions": payloads[start:start + chunk]}})
            if reply.get("type") != "observations" or not isinstance(reply.get("data"), list):
                raise ProtocolError(f"Expected an 'observations' frame, got {reply!r}")
            for item in reply["data"]:
                if not isinstance(item, dict):
                    raise ProtocolError(f"Malformed element in 'observations' frame: {item!r}")
                if "error" in item:
                    err = error_from_wire(item["error"])
                    err.partial_results = results  # type: ignore[attr-defined]
                    if err.code in _FATAL_CODES:  # the server ended the session
                        self._lost = err
                    raise err
                results.append(self._parse_result(item))
            if results and results[-1].done:
                break
        return results

    async def state(self) -> Any:
        """The env's current state (a ``state_type`` model, or a dict)."""
        reply = await self._request({"type": "state"})
        return self._parse_state(_expect(reply, "state"))

    async def extensions(self) -> set[str]:
        """Protocol extensions the server granted (docs/protocol.md §12); empty for upstream servers."""
        if self._extensions is None:
            try:
                reply = await self._request(
                    {"type": "hello", "data": {"want": ["step_kwargs", "step_batch", "sessions"]}},
                    opens_session=True
                )
                data = reply.get("data", {})
                self._extensions = set(data.get("extensions", []))
                sid = data.get("session_id")
                self._session_id = sid if isinstance(sid, str) else None
                size = data.get("max_batch_actions")
                self._max_batch = size if isinstance(size, int) and not isinstance(size, bool) and size > 0 \
                    else None
            except ProtocolError:  # upstream: UNKNOWN_TYPE, session kept
                self._extensions = set()
        return self._extensions

    async def _require_extension(self, name: str, what: str, *, hint: str | None = None) -> None:
        if name not in await self.extensions():
            hint = hint or "Call step(action) without them, or configure the behaviour on the server side."
            raise ConfigError(
                f"The server at {self._base_url} does not accept {what} (it did not grant the "
                f"'{name}' protocol extension; upstream OpenEnv servers never do). {hint}"
            )

    async def vector(self, n: int) -> VectorEnv[ActT, ObsT]:
        """``n`` sessions driven over this client's one connection (docs/protocol.md §12, extension ``sessions``).

        Session 0 is this client's own session; the others are opened on the same connection and
        closed with ``VectorEnv.close()`` or with the connection. One ``VectorEnv.step(actions)``
        sends one step to every session in a single frame. Needs a server that grants the
        ``sessions`` extension (``ConfigError`` otherwise: use ``new_session()`` per env instead).
        """
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ConfigError(f"vector(n) needs a positive number of sessions, got {n!r}.")
        await self._require_extension(
            "sessions", "several sessions on one connection",
            hint="Open one client per env with new_session() instead.")
        if self._session_id is None:
            raise ProtocolError("The server granted 'sessions' but its hello reply named no session_id.")
        ids = [self._session_id]
        vec: VectorEnv[ActT, ObsT] = VectorEnv(self, ids)
        try:
            for _ in range(n - 1):
                # primary=False: a refusal (capacity) is about the new session, not this one.
                reply = await self._request({"type": "open"}, primary=False)
                ids.append(_expect(reply, "opened")["session_id"])
        except BaseException:
            await vec.close()
            raise
        return vec

    async def new_session(self) -> EnvClient[ActT, ObsT]:
        """Another client (another server session) on the same server, closed with this one."""
        child = type(self).__new__(type(self))
        child.__dict__.update(self.__dict__)
        child._conn, child._lost, child._children, child._provider = None, None, [], None
        child._extensions, child._session_id, child._lock = None, None, None
        self._children.append(child)
        return await child.connect()

    # -- hooks (upstream-compatible names) --------------------------------------------------------

    def _step_payload(self, action: ActT | dict[str, Any]) -> dict[str, Any]:
        """Action → the ``data`` of a step frame."""
        if isinstance(action, BaseModel):
            return action.model_dump()
        if isinstance(action, dict):
            return action
        if hasattr(action, "__dict__"):
            return dict(vars(action))
        raise TypeError(f"Cannot send {type(action).__name__} as an action; pass a model or a dict.")

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[ObsT]:
        """Observation payload → ``StepResult``. Tolerates upstream quirks (boolean rewards, no metadata)."""
        obs_data = payload.get("observation")
        if not isinstance(obs_data, dict):
            raise ProtocolError(f"Malformed observation payload: {payload!r}")
        reward = _reward(payload.get("reward"))
        done = bool(payload.get("done", False))
        obs: Any = obs_data
        if self.observation_type is not None:
            full = dict(obs_data)
            full["reward"] = reward
            full["done"] = done
            obs = self.observation_type.model_validate(full)
        return StepResult(observation=obs, reward=reward, done=done, metadata=payload.get("metadata"))

    def _parse_state(self, payload: dict[str, Any]) -> Any:
        """State payload → ``state_type`` model (or the dict)."""
        if self.state_type is not None:
            return self.state_type.model_validate(payload)
        return payload

    # -- bootstrap --------------------------------------------------------------------------------

    @classmethod
    async def from_provider(
        cls,
        env: str,
        provider: str | None = None,
        *,
        launch: LaunchSpec | None = None,
        **client_kwargs: Any,
    ) -> EnvClient[ActT, ObsT]:
        """Start ``env`` through a provider (chosen by the decision hook; ``local`` by default),
        connect, and stop the server again when the client is closed."""
        from openenv.plugins import get_plugin_manager

        pm = get_plugin_manager()
        name = pm.choose_provider(env, provider)
        prov = pm.catalog.providers.load(name)()
        spec = launch or LaunchSpec(env=env)
        handle = await asyncio.to_thread(prov.start, spec)
        try:
            if spec.token and "token" not in client_kwargs:
                client_kwargs["token"] = spec.token
            client = cls(handle.base_url, provider=handle, **client_kwargs)
            client._owns_provider = True  # type: ignore[attr-defined]
            return await client.connect()
        except BaseException:
            await asyncio.to_thread(handle.stop)
            raise

    def sync(self) -> SyncEnvClient[ActT, ObsT]:
        """A blocking twin of this client (runs it on a background event-loop thread)."""
        return SyncEnvClient(self)


def _expect(reply: dict[str, Any], kind: str) -> dict[str, Any]:
    if reply.get("type") != kind:
        raise ProtocolError(f"Expected a '{kind}' frame, got {reply.get('type')!r}: {reply!r}")
    data = reply.get("data")
    if not isinstance(data, dict):
        raise ProtocolError(f"Malformed '{kind}' frame: {reply!r}")
    return data


def _reward(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool):  # upstream servers may send booleans (docs/protocol.md §11 B6)
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        result = float(value)
        if not math.isfinite(result):
            raise ProtocolError(f"Non-finite reward from server: {value!r}")
        return result
    raise ProtocolError(f"Reward must be a number or null, got {value!r}")


class GenericEnvClient(EnvClient[dict[str, Any], dict[str, Any]]):
    """Dict in, dict out: works with any env without its Python types."""


class VectorEnv(Generic[ActT, ObsT]):
    """Several sessions of one server over one connection: a vector env for batched policies.

    Built by ``await client.vector(n)``. ``step(actions)`` takes one action per session and sends
    them in one ``step_many`` frame (several if the server's per-frame limit is lower); the
    server answers one observation per session. Steps are independent: if some fail, the first
    error is raised with ``err.results`` (a ``StepResult`` per session, ``None`` where it failed)
    and ``err.failures`` (index → error) attached, and every session stays usable.
    """

    def __init__(self, client: EnvClient[ActT, ObsT], session_ids: list[str]) -> None:
        self.client = client
        self.session_ids = session_ids

    def __len__(self) -> int:
        return len(self.session_ids)

    async def reset(self, **kwargs: Any) -> list[StepResult[ObsT]]:
        """Reset every session (same arguments for each); one result per session."""
        return [await self.reset_at(i, **kwargs) for i in range(len(self.session_ids))]

    async def reset_at(self, index: int, **kwargs: Any) -> StepResult[ObsT]:
        """Reset session ``index`` alone (e.g. after its episode ended)."""
        sid = self.session_ids[index]
        reply = await self.client._request({"type": "reset", "session_id": sid, "data": kwargs},
                                           primary=index == 0)
        return self.client._parse_result(_expect(reply, "observation"))

    async def step(self, actions: list[ActT | dict[str, Any]]) -> list[StepResult[ObsT]]:
        """One action per session, in session order; one result per session."""
        if len(actions) != len(self.session_ids):
            raise ConfigError(f"VectorEnv.step needs one action per session: got {len(actions)} actions "
                              f"for {len(self.session_ids)} sessions.")
        client = self.client
        steps = [{"session_id": sid, "action": client._step_payload(a)}
                 for sid, a in zip(self.session_ids, actions, strict=True)]
        chunk = client._max_batch or len(steps)
        results: list[StepResult[ObsT] | None] = []
        errors: dict[int, OpenEnvError] = {}
        for start in range(0, len(steps), chunk):
            part = steps[start:start + chunk]
            reply = await client._request({"type": "step_many", "data": {"steps": part}})
            items = reply.get("data")
            if reply.get("type") != "observations" or not isinstance(items, list) or len(items) != len(part):
                raise ProtocolError(f"Expected an 'observations' frame with {len(part)} elements, got {reply!r}")
            for offset, item in enumerate(items):
                if not isinstance(item, dict):
                    raise ProtocolError(f"Malformed element in 'observations' frame: {item!r}")
                if "error" in item:
                    errors[start + offset] = error_from_wire(item["error"])
                    results.append(None)
                else:
                    results.append(client._parse_result(item))
        if errors:
            first = errors[min(errors)]
            first.results = results  # type: ignore[attr-defined]
            first.failures = errors  # type: ignore[attr-defined]
            raise first
        return results  # type: ignore[return-value]

    async def state(self) -> list[Any]:
        """Every session's state, in session order."""
        out = []
        for i, sid in enumerate(self.session_ids):
            reply = await self.client._request({"type": "state", "session_id": sid}, primary=i == 0)
            out.append(self.client._parse_state(_expect(reply, "state")))
        return out

    async def close(self) -> None:
        """Close the sessions opened for this vector (session 0, the client's own, stays open)."""
        extra, self.session_ids = self.session_ids[1:], self.session_ids[:1]
        client = self.client
        if client._conn is None or client._conn.closed:
            return
        for sid in extra:
            await client._request({"type": "close_session", "data": {"session_id": sid}}, primary=False)

    async def __aenter__(self) -> VectorEnv[ActT, ObsT]:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class _LoopThread:
    """A private event loop on a daemon thread; coroutines are submitted to it and awaited."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="openenv-client-loop", daemon=True)
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        fut: Future[_T] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return fut.result()

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

    def close(self) -> None:
        try:
            self._run(self._client.close)
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

    def state(self) -> list[Any]:
        return self._runner.run(self._vec.state())

    def close(self) -> None:
        self._runner.run(self._vec.close())

    def __enter__(self) -> SyncVectorEnv[ActT, ObsT]:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
