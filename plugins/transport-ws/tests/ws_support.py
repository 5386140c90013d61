"""Test support: small envs and a real uvicorn server on 127.0.0.1 in a background thread."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import uvicorn
from pydantic import Field
from pydantic.version import version_short
from websockets.asyncio.client import ClientConnection, connect

import openenv_transport_ws.plugin
from openenv.env import Environment
from openenv.plugins import PluginManager
from openenv.server import ServerContext, create_app
from openenv.types import Action, Observation, State

URL = f"https://errors.pydantic.dev/{version_short()}/v/"


# -- envs -----------------------------------------------------------------------------------------


class EchoAction(Action):
    message: str = Field(..., min_length=1)


class EchoObservation(Observation):
    echoed_message: str = ""
    message_length: int = 0


class EchoEnv(Environment[EchoAction, EchoObservation, State]):
    """Typed echo with failure modes chosen by the message.

    ``boom`` raises ValueError("kaboom"); ``slow`` blocks until ``RELEASE`` is set (at most 10 s);
    ``nan`` returns a NaN reward (bypassing validation); ``bool`` builds a boolean reward (refused
    at construction); ``break_state`` / ``break_close`` make ``state`` / ``close`` raise.
    ``reset(fail=...)`` raises RuntimeError(fail).
    """

    SUPPORTS_CONCURRENT_SESSIONS = True
    RELEASE = threading.Event()
    closed: list[str] = []

    def __init__(self) -> None:
        super().__init__()
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)
        self._broken_state = False
        self._broken_close = False

    def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> EchoObservation:
        if kwargs.get("fail"):
            raise RuntimeError(kwargs["fail"])
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        return EchoObservation(echoed_message="ready", message_length=0, reward=0.0)

    def step(self, action: EchoAction, timeout_s: float | None = None, note: str | None = None) -> EchoObservation:
        msg = action.message
        if msg == "boom":
            raise ValueError("kaboom")
        if msg == "slow":
            self.RELEASE.wait(10)
        if msg == "break_state":
            self._broken_state = True
        if msg == "break_close":
            self._broken_close = True
        self._state.step_count += 1
        metadata: dict[str, Any] = {"original_message": msg, "step": self._state.step_count}
        if timeout_s is not None:
            metadata["timeout_s"] = timeout_s
        if note is not None:
            metadata["note"] = note
        if msg == "nan":
            return EchoObservation.model_construct(
                echoed_message=msg, message_length=len(msg), reward=float("nan"), done=False,
                metadata=metadata)
        if msg == "bool":
            return EchoObservation(echoed_message="b", message_length=1, reward=True, done=True)
        return EchoObservation(echoed_message=msg, message_length=len(msg), reward=0.1 * len(msg),
                               metadata=metadata)

    @property
    def state(self) -> State:
        if self._broken_state:
            raise KeyError("x")
        return self._state

    def close(self) -> None:
        EchoEnv.closed.append(self._state.episode_id or "")
        if self._broken_close:
            raise RuntimeError("close failed")


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


class LiveServer:
    """uvicorn serving ``app`` on a pre-bound 127.0.0.1 socket, in a background thread."""

    def __init__(self, app: Any, *, ws_max_size: int) -> None:
        self.app = app
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        config = uvicorn.Config(
            app, log_level="warning", lifespan="on", ws_max_size=ws_max_size,
            ws_per_message_deflate=False, access_log=False, timeout_graceful_shutdown=5,
        )
        self.server = uvicorn.Server(config)
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread = threading.Thread(target=self._run, name="test-uvicorn", daemon=True)

    @property
    def ctx(self) -> ServerContext:
        return self.app.state.ctx  # type: ignore[no-any-return]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/ws"

    def _run(self) -> None:
        async def main() -> None:
            self.loop = asyncio.get_running_loop()
            await self.server.serve(sockets=[self.sock])

        asyncio.run(main())

    def start(self) -> None:
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(20)
        self.sock.close()
        if self.thread.is_alive():
            raise RuntimeError("uvicorn did not stop within 20 s")

    def call(self, coro: Any, timeout: float = 10) -> Any:
        """Run a coroutine on the server's event loop (session manager calls are loop-bound)."""
        assert self.loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)



@contextlib.contextmanager
def live_server(env: Any, *, ws_max_size: int | None = None, **settings: Any) -> Iterator[LiveServer]:
    """Serve ``env`` with only the ``ws`` transport; always shuts down."""
    app = create_app(env, transports=["ws"], plugin_manager=plugin_manager(), **settings)
    server = LiveServer(app, ws_max_size=ws_max_size or app.state.ctx.config.max_message_bytes)
    server.start()
    try:
        yield server
    finally:
        EchoEnv.RELEASE.set()
        AffinityEnv.GATE.set()
        server.stop()


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


async def eventually(predicate: Callable[[], bool], timeout: float = 10) -> None:
    """Poll ``predicate`` (bounded, without blocking the loop); fail clearly if it never holds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not reached within {timeout} s")
        await asyncio.sleep(0.01)


async def closed_with(ws: ClientConnection) -> tuple[int | None, str | None]:
    """Wait (bounded) for the server to close the connection; return (code, reason)."""
    await asyncio.wait_for(ws.wait_closed(), 10)
    return ws.close_code, ws.close_reason
