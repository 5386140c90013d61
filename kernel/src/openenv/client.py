"""The client: ``EnvClient`` (async), its sync twin ``SyncEnvClient``, and ``GenericEnvClient``.

One client = one server session. The protocol logic lives here (its vocabulary in
``openenv.protocol``); moving frames is the job of a connector from a transport plugin (WebSocket
by default, HTTP with ``transport="rest"``), chosen in ``openenv.client_connect``. The blocking
twins live in ``openenv.client_sync``, ``VectorEnv`` in ``openenv.client_vector``; all are
importable from here and from ``openenv``.

Without ``token=`` (and without an ``Authorization`` header) the client sends the token in
``OPENENV_TOKEN`` when it is set, the variable ``openenv serve`` reads too.

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
import os
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar
from urllib.parse import urlsplit

from pydantic import BaseModel

from openenv.client_connect import TOKEN_ENV, resolve_connector
from openenv.client_snapshot import SnapshotCalls
from openenv.client_tasks import TaskQueries
from openenv.client_vector import VectorEnv, VectorLink
from openenv.errors import (
    ConfigError,
    OpenEnvError,
    ProtocolError,
    SessionLostError,
    error_from_wire,
)
from openenv.interfaces import ClientConnector, Connection, ConnectOptions, LaunchSpec, ProviderHandle
from openenv.lazy import lazy_exports
from openenv.modes import Mode
from openenv.protocol import (
    EXT_SESSIONS,
    EXT_STEP_BATCH,
    EXT_STEP_KWARGS,
    T_ERROR,
    T_OBSERVATION,
    T_OPEN,
    T_OPENED,
    T_RESET,
    T_STATE,
    T_STEP,
    T_STEP_BATCH,
    expect,
    expect_list,
    frame,
    hello_frame,
    parse_hello,
)
from openenv.protocol import (
    reward as wire_reward,
)
from openenv.types import REWARD_COMPONENTS_HEADER, State, StepResult, with_reward_components

if TYPE_CHECKING:
    from openenv.client_sync import SyncEnvClient, SyncVectorEnv

__all__ = ["EnvClient", "GenericEnvClient", "SyncEnvClient", "SyncVectorEnv", "VectorEnv"]

ActT = TypeVar("ActT")
ObsT = TypeVar("ObsT")
_FATAL_CODES = frozenset({"CAPACITY_REACHED", "FACTORY_ERROR", "SESSION_ERROR"})


class EnvClient(TaskQueries, SnapshotCalls, Generic[ActT, ObsT]):
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
        mode: Mode | str | None = None,
        binary_images: bool = False,
    ) -> None:
        if base_url is None and provider is None:
            raise ConfigError("EnvClient needs base_url=... (or a started provider handle).")
        if mode is not None and mode.lower() not in tuple(Mode):
            raise ConfigError(f"Invalid mode: {mode!r}. Use one of: {', '.join(Mode)}.")
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
        if token is None and not any(k.lower() == "authorization" for k in hdrs):
            token = os.environ.get(TOKEN_ENV) or None
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
            binary_images=binary_images,
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
            self._connector = resolve_connector(self._base_url, self._transport)
        self._conn = await self._connector.connect(self._base_url, _asking_for_components(self._options))
        self._lost = None
        self._extensions = None
        if self._options.binary_images:
            # Negotiated before the first reset: the connection adds binary_images to the hello's
            # want and reads the binary frames (an upstream server refuses hello; nothing changes).
            await self.extensions()
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

    async def mark_lost(self, cause: str) -> None:
        """Declare this session gone from the outside (an ``EnvPool`` saw its server die): a request
        in flight fails now and the next ``step``/``state`` raises ``SessionLostError`` naming
        ``cause``; ``reset()`` or ``reconnect()`` start over, as after a dropped connection."""
        self._lost = SessionLostError(cause, data={"cause": cause})
        conn = self._conn
        if conn is not None:
            try:
                await conn.abort()
            except Exception:  # the connection is being dropped anyway
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
        if kind == T_ERROR:
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
        reply = await self._request(frame(T_RESET, kwargs), opens_session=True)
        return self._result(expect(reply, T_OBSERVATION))

    async def step(self, action: ActT | dict[str, Any], **kwargs: Any) -> StepResult[ObsT]:
        """Apply an action. ``kwargs`` (e.g. ``timeout_s``) need a server that negotiated them."""
        request: dict[str, Any] = {"type": T_STEP, "data": self._step_payload(action)}  # type: ignore[arg-type]
        if kwargs:
            await self._require_extension(EXT_STEP_KWARGS, "step arguments " + ", ".join(sorted(kwargs)))
            request["kwargs"] = kwargs
        reply = await self._request(request)
        return self._result(expect(reply, T_OBSERVATION))

    async def step_batch(self, actions: list[ActT | dict[str, Any]]) -> list[StepResult[ObsT]]:
        """Apply ``actions`` in order in as few frames as the server allows (docs/protocol.md §12 "Batched steps").

        Stops after the first result with ``done``, so the list may be shorter than ``actions``.
        If an action fails, its typed error is raised with the results before it attached as
        ``err.partial_results``; the session survives, as after a failed ``step``. Needs a server
        that grants the ``step_batch`` extension (``ConfigError`` otherwise).
        """
        await self._require_extension(
            EXT_STEP_BATCH, "batched steps",
            hint="Call step(action) once per action instead.")
        payloads = [self._step_payload(a) for a in actions]
        chunk = self._max_batch or len(payloads) or 1
        results: list[StepResult[ObsT]] = []
        for start in range(0, len(payloads), chunk):
            reply = await self._request(frame(T_STEP_BATCH, {"actions": payloads[start:start + chunk]}))
            for item in expect_list(reply):
                if "error" in item:
                    err = error_from_wire(item["error"])
                    err.partial_results = results  # type: ignore[attr-defined]
                    if err.code in _FATAL_CODES:  # the server ended the session
                        self._lost = err
                    raise err
                results.append(self._result(item))
            if results and results[-1].done:
                break
        return results

    async def state(self) -> Any:
        """The env's current state (a ``state_type`` model, or a dict)."""
        reply = await self._request(frame(T_STATE))
        return self._parse_state(expect(reply, T_STATE))

    async def extensions(self) -> set[str]:
        """Protocol extensions the server granted (docs/protocol.md §12); empty for upstream servers."""
        if self._extensions is None:
            try:
                hello = parse_hello(await self._request(hello_frame(), opens_session=True))
                self._extensions = set(hello.extensions)
                self._session_id = hello.session_id
                self._max_batch = hello.max_batch_actions
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
            EXT_SESSIONS, "several sessions on one connection",
            hint="Open one client per env with new_session() instead.")
        if self._session_id is None:
            raise ProtocolError("The server granted 'sessions' but its hello reply named no session_id.")
        ids = [self._session_id]
        link = VectorLink(request=self._request, result=self._result, step_payload=self._step_payload,
                          parse_state=self._parse_state, max_batch=lambda: self._max_batch)
        vec: VectorEnv[ActT, ObsT] = VectorEnv(self, ids, link)
        try:
            for _ in range(n - 1):
                # primary=False: a refusal (capacity) is about the new session, not this one.
                reply = await self._request(frame(T_OPEN), primary=False)
                ids.append(expect(reply, T_OPENED)["session_id"])
        except BaseException:
            await vec.close()
            raise
        return vec

    async def new_session(self) -> EnvClient[ActT, ObsT]:
        """Another client (another server session) on the same server, closed with this one."""
        child = self.unconnected_copy()
        self._children.append(child)
        return await child.connect()

    def unconnected_copy(self) -> EnvClient[ActT, ObsT]:
        """A client with this one's settings (URL, types, headers, timeouts), not yet connected:
        its first call opens a session of its own. It does not own this client's provider."""
        child = type(self).__new__(type(self))
        child.__dict__.update(self.__dict__)
        child._conn, child._lost, child._children, child._provider = None, None, [], None
        child._extensions, child._session_id, child._lock = None, None, None
        return child

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

    def _result(self, payload: dict[str, Any]) -> StepResult[ObsT]:
        """``_parse_result`` (a subclass may override it), plus the server rubric's components."""
        return with_reward_components(self._parse_result(payload), payload)

    def _parse_result(self, payload: dict[str, Any]) -> StepResult[ObsT]:
        """Observation payload → ``StepResult``. Tolerates upstream quirks (boolean rewards, no metadata)."""
        obs_data = payload.get("observation")
        if not isinstance(obs_data, dict):
            raise ProtocolError(f"Malformed observation payload: {payload!r}")
        reward = wire_reward(payload.get("reward"))
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

    @classmethod
    async def from_env(cls, repo_id: str, use_docker: bool = True, provider: str | None = None,
                       **client_kwargs: Any) -> EnvClient[ActT, ObsT]:
        """Upstream's bootstrap by Hub name, as trainers call it: ``await
        GenericEnvClient.from_env("openenv/echo-env", use_docker=False)`` is ``from_provider`` of the
        env installed here under that name (``org/name-env`` -> ``name``; ``provider``, ``local`` by
        default). Nothing is downloaded: ``use_docker=True`` (upstream's default, which pulls the
        Space's image) is a ``ConfigError`` naming what to call instead."""
        from openenv.client_connect import installed_env_for

        if use_docker:
            raise ConfigError(
                f"from_env({repo_id!r}, use_docker=True) would pull the Hugging Face Space's image; that "
                "bootstrap is not built in. Pass use_docker=False to start the env installed here, "
                "from_provider(env, provider='docker') for its image, or base_url= of a running server.")
        return await cls.from_provider(installed_env_for(repo_id), provider or "local", **client_kwargs)

    def sync(self) -> SyncEnvClient[ActT, ObsT]:
        """A blocking twin of this client (runs it on a background event-loop thread)."""
        from openenv.client_sync import SyncEnvClient

        return SyncEnvClient(self)


class GenericEnvClient(EnvClient[dict[str, Any], dict[str, Any]]):
    """Dict in, dict out: works with any env without its Python types."""


#: Kept for code that imported the private helper from here (the upstream compatibility layer).
_reward = wire_reward
#: Names that live in the split-out modules, resolved on first use (no import cycle, no cost to
#: importing this module).
_LAZY = {
    "SyncEnvClient": "openenv.client_sync",
    "SyncVectorEnv": "openenv.client_sync",
    "_LoopThread": "openenv.client_sync",
}


def _asking_for_components(options: ConnectOptions) -> ConnectOptions:
    """``options`` plus the header that asks for the server rubric's components (docs/protocol.md
    §2.7), unless the caller set it; the caller's own ``headers`` stay as given."""
    if any(k.lower() == REWARD_COMPONENTS_HEADER for k in options.headers):
        return options
    return replace(options, headers={**options.headers, REWARD_COMPONENTS_HEADER: "1"})


# Only the lazy names: this module's own __all__ (above) lists its public surface.
__getattr__, __dir__, _ = lazy_exports(__name__, _LAZY)
