"""Fixtures: real uvicorn servers on 127.0.0.1, run in the test's own event loop.

The server runs in-process (the kit's ``openenv.testing.serving``), so tests can reach the app's
``ServerContext`` (``running.ctx``) and call the session manager directly (e.g. ``reap_idle()``)
on the loop that owns it. Every server is shut down when the test ends.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from rest_support import EchoEnv, Running, Serve, make_plugin_manager

from openenv.server import create_app
from openenv.testing import serving


@pytest.fixture(autouse=True)
def _fresh_env_counters() -> None:
    EchoEnv.clear()
    EchoEnv.slow_s = 0.5


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    """``await serve(env=EchoEnv, **settings)`` starts a server; all are stopped at teardown."""
    async with contextlib.AsyncExitStack() as stack:

        async def start(env: Any = EchoEnv, **settings: Any) -> Running:
            settings.setdefault("transports", ["rest"])
            app = create_app(env, plugin_manager=make_plugin_manager(), **settings)
            served = await stack.enter_async_context(serving(app))
            return Running(served.url, app)

        yield start
