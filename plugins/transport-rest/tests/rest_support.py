"""Test support for openenvkit-transport-rest: a typed echo env, plugin manager, server handle.

(Named uniquely, not ``helpers``, because several packages' tests may share one pytest process.)
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import httpx
from pydantic import Field

import openenv_transport_rest.plugin
from openenv.env import Environment
from openenv.plugins import PluginManager
from openenv.server import ServerContext
from openenv.types import Action, Observation, State


class EchoAction(Action):
    message: str = Field(min_length=1, description="Text to echo")


class EchoObservation(Observation):
    echoed_message: str = ""
    message_length: int = 0


class EchoEnv(Environment[EchoAction, EchoObservation, State]):
    """Spec T1/T3 echo env. "boom" raises, "nan" yields a NaN reward, "slow" sleeps.

    ``live`` holds the instances not yet closed, so tests can prove nothing leaks.
    """

    SUPPORTS_CONCURRENT_SESSIONS = True
    live: ClassVar[set[EchoEnv]] = set()
    created: ClassVar[int] = 0
    lock: ClassVar[threading.Lock] = threading.Lock()
    slow_s: ClassVar[float] = 0.5

    def __init__(self) -> None:
        super().__init__()
        self._state = State(episode_id=str(uuid.uuid4()), step_count=0)
        with EchoEnv.lock:
            EchoEnv.live.add(self)
            EchoEnv.created += 1

    def reset(self, seed: int | None = None, episode_id: str | None = None) -> EchoObservation:
        self._state = State(episode_id=episode_id or str(uuid.uuid4()), step_count=0)
        self._state.seed = seed  # type: ignore[attr-defined]  # State allows extra keys
        return EchoObservation(echoed_message="ready", message_length=0, reward=0.0)

    def step(self, action: EchoAction, timeout_s: float | None = None) -> EchoObservation:
        msg = action.message
        if msg == "boom":
            raise ValueError("kaboom")
        if msg == "slow":
            time.sleep(EchoEnv.slow_s)
        self._state.step_count += 1
        self._state.last_timeout_s = timeout_s  # type: ignore[attr-defined]
        if msg == "nan":
            # Bypasses validation the way a buggy env could; the server must refuse to send it.
            return EchoObservation.model_construct(echoed_message=msg, message_length=3, reward=float("nan"),
                                                   done=False, metadata={})
        return EchoObservation(
            echoed_message=msg, message_length=len(msg), reward=min(0.1 * len(msg), 1.0),
            metadata={"original_message": msg, "step": self._state.step_count},
        )

    @property
    def state(self) -> State:
        return self._state

    def close(self) -> None:
        with EchoEnv.lock:
            EchoEnv.live.discard(self)


def bad_factory() -> EchoEnv:
    raise RuntimeError("no env today")


def make_plugin_manager() -> PluginManager:
    pm = PluginManager(strict=True, entry_points=[])
    pm.register(openenv_transport_rest.plugin, name="rest")
    return pm


@dataclass
class Running:
    """A served app: its base URL and the kernel's ServerContext."""

    url: str
    app: Any

    @property
    def ctx(self) -> ServerContext:
        return self.app.state.ctx  # type: ignore[no-any-return]

    def client(self, **kw: Any) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.url, trust_env=False, timeout=10.0, **kw)


Serve = Callable[..., Awaitable[Running]]


async def wait_until(predicate: Callable[[], bool], *, tries: int = 500, delay: float = 0.01) -> bool:
    """Poll ``predicate`` a bounded number of times; return its last value."""
    for _ in range(tries):
        if predicate():
            return True
        await asyncio.sleep(delay)
    return predicate()


async def raw_http(url: str, request: bytes, *, close_after_send: bool = False,
                   timeout_s: float = 10.0) -> tuple[int, list[tuple[str, str]], bytes]:
    """Send ``request`` (raw HTTP/1.1 bytes) on a new connection; return status, headers in wire
    order (names lowercased) and body. With ``close_after_send`` the socket is closed right after
    sending and ``(0, [], b"")`` is returned (a client that leaves mid-request)."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.wait_for(asyncio.open_connection(host, int(port)), timeout_s)
    try:
        writer.write(request)
        await writer.drain()
        if close_after_send:
            return 0, [], b""
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout_s)
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ")[1])
        headers = [(k.strip().lower(), v.strip()) for k, v in (ln.split(":", 1) for ln in lines[1:] if ln)]
        length = int(dict(headers).get("content-length", "0"))
        body = await asyncio.wait_for(reader.readexactly(length), timeout_s) if length else b""
        return status, headers, body
    finally:
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
