"""A real server in a background thread (uvicorn on 127.0.0.1, a free port) for the rule tests.

Private to these tests until ``openenv.testing`` ships its live-server fixture.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn

from openenv.context import ServerContext
from openenv.server import create_app

__all__ = ["Served", "served"]


class Served:
    """A running server: ``url`` (http://127.0.0.1:port), ``ws_url`` and its ``ctx``."""

    def __init__(self, ctx: ServerContext, port: int) -> None:
        self.ctx = ctx
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.ws_url = f"ws://127.0.0.1:{port}"


@contextmanager
def served(env: Any, **settings: Any) -> Iterator[Served]:
    """Serve ``env`` with ``create_app(env, **settings)`` until the block ends."""
    app = create_app(env, **settings)
    config = uvicorn.Config(app, host="127.0.0.1", port=0, lifespan="on", log_level="warning",
                            ws_per_message_deflate=False, access_log=False)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="served-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            raise RuntimeError("the test server did not start within 20 s")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield Served(app.state.ctx, port)
    finally:
        server.should_exit = True
        thread.join(timeout=20)
