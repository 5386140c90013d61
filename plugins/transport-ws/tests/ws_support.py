"""Test support: small envs, the kit's live server with only ``ws``, and raw WebSocket helpers.

The echo env, the live server and ``eventually`` come from ``openenv.testing`` (re-exported here
for the test modules).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any

from pydantic.version import version_short
from websockets.asyncio.client import ClientConnection, connect

import openenv_transport_ws.plugin
from openenv.env import Environment
from openenv.plugins import PluginManager
from openenv.testing import EchoAction, EchoEnv, EchoObservation, LiveServer, eventually
from openenv.testing import live_server as kit_live_server
from openenv.types import State

__all__ = ["URL", "AffinityEnv", "EchoAction", "EchoEnv", "EchoObservation", "LiveServer", "bad_factory",
           "closed_with", "eventually", "live_server", "plugin_manager", "recv", "rpc", "send", "ws_open"]

URL = f"https://errors.pydantic.dev/{version_short()}/v/"


# -- envs (the echo env is the kit's: openenv.testing.EchoEnv) ------------------------------------


class AffinityEnv(Environment[EchoAction, EchoObservation, State]):
    """A thread-affine env that records the thread it was created on and closed on.

    ``slow`` steps mark themselves started, then wait for ``GATE`` (at most 10 s).
    """

    SUPPORTS_CONCURRENT_SESSIONS = True
    THREAD_AFFINITY = True
    GATE = threading.Event()
    lock = threading.Lock()
    created: list[int] = []
    closes: list[tuple[int, int, str]] = []  # (creator ident, closer ident, closer name)
    started = 0

    def __init__(self) -> None:
        super().__init__()
        self._creator = threading.get_ident()
        with AffinityEnv.lock:
            AffinityEnv.created.append(self._creator)
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)

    @classmethod
    def clear(cls) -> None:
        with cls.lock:
            cls.created, cls.closes, cls.started = [], [], 0
        cls.GATE.clear()

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> EchoObservation:
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return EchoObservation(echoed_message="ready", reward=0.0)

    def step(self, action: EchoAction, timeout_s: float | None = None, **kwargs: Any) -> EchoObservation:
        if action.message == "slow":
            with AffinityEnv.lock:
                AffinityEnv.started += 1
            AffinityEnv.GATE.wait(10)
        self._state.step_count += 1
        return EchoObservation(echoed_message=action.message, message_length=len(action.message))

    @property
    def state(self) -> State:
        return self._state

    def close(self) -> None:
        current = threading.current_thread()
        with AffinityEnv.lock:
            AffinityEnv.closes.append((self._creator, current.ident or 0, current.name))


def bad_factory() -> EchoEnv:
    raise RuntimeError("the factory is broken")


# -- server ---------------------------------------------------------------------------------------


def plugin_manager() -> PluginManager:
    """A plugin manager that sees only this plugin (never ambient entry points)."""
    pm = PluginManager(strict=True, entry_points=[])
    pm.register(openenv_transport_ws.plugin, name="ws")
    return pm


@contextlib.contextmanager
def live_server(env: Any, *, ws_max_size: int | None = None, **settings: Any) -> Iterator[LiveServer]:
    """The kit's ``live_server`` with only the ``ws`` transport; blocked steps are released
    before it shuts down."""
    with kit_live_server(env, transports=["ws"], plugin_manager=plugin_manager(),
                         ws_max_size=ws_max_size, **settings) as server:
        try:
            yield server
        finally:
            EchoEnv.RELEASE.set()
            AffinityEnv.GATE.set()


# -- raw client helpers ---------------------------------------------------------------------------


async def ws_open(server: LiveServer, query: str = "") -> ClientConnection:
    return await connect(server.ws_url + query, compression=None, proxy=None, open_timeout=10)


async def send(ws: ClientConnection, frame: Any) -> None:
    await ws.send(frame if isinstance(frame, str | bytes) else json.dumps(frame, ensure_ascii=False))


async def recv(ws: ClientConnection) -> Any:
    return json.loads(await asyncio.wait_for(ws.recv(), 10))


async def rpc(ws: ClientConnection, frame: Any) -> Any:
    await send(ws, frame)
    return await recv(ws)


async def closed_with(ws: ClientConnection) -> tuple[int | None, str | None]:
    """Wait (bounded) for the server to close the connection; return (code, reason)."""
    await asyncio.wait_for(ws.wait_closed(), 10)
    return ws.close_code, ws.close_reason
