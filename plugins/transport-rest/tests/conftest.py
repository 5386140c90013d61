"""Fixtures: real uvicorn servers on 127.0.0.1, run in the test's own event loop.

The server runs in-process on a socket bound to 127.0.0.1:0 before uvicorn starts, so tests can
reach the app's ``ServerContext`` (``running.ctx``) and call the session manager directly (e.g.
``reap_idle()``) on the loop that owns it. Every server is shut down when the test ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
import uvicorn
from rest_support import EchoEnv, Running, Serve, make_plugin_manager

from openenv.server import create_app


@pytest.fixture(autouse=True)
def _fresh_env_counters() -> None:
    EchoEnv.live.clear()
    EchoEnv.created = 0
    EchoEnv.slow_s = 0.5


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    """``await serve(env=EchoEnv, **settings)`` starts a server; all are stopped at teardown."""
    started: list[tuple[uvicorn.Server, asyncio.Task[None], socket.socket]] = []

    async def start(env: Any = EchoEnv, **settings: Any) -> Running:
        settings.setdefault("transports", ["rest"])
        app = create_app(env, plugin_manager=make_plugin_manager(), **settings)
        # IPPROTO_TCP so asyncio sets TCP_NODELAY on accepted sockets (else ~40 ms per reply).
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.bind(("127.0.0.1", 0))
        config = uvicorn.Config(app, lifespan="on", log_level="warning", access_log=False)
        server = uvicorn.Server(config)
        task = asyncio.create_task(server.serve(sockets=[sock]))
        started.append((server, task, sock))
        for _ in range(1000):  # at most ~10 s
            if server.started or task.done():
                break
            await asyncio.sleep(0.01)
        assert server.started, "uvicorn did not start"
        port = sock.getsockname()[1]
        return Running(f"http://127.0.0.1:{port}", app)

    try:
        yield start
    finally:
        for server, task, sock in started:
            server.should_exit = True
            try:
                await asyncio.wait_for(task, 10)
            except TimeoutError:
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task
            sock.close()

