"""A real uvicorn server for tests, bound to 127.0.0.1 on a free port.

Two ways to run one, both on a socket bound *before* uvicorn starts (so the port is known and no
other process can take it in between):

* ``live_server(env, **settings)`` – a context manager that builds the app with ``create_app``,
  serves it from a background thread with its own event loop, waits until uvicorn accepts
  connections and yields a ``LiveServer`` (``.url``, ``.ws_url``, ``.port``, ``.app``, ``.ctx``,
  ``.call(coro)`` to run a coroutine on the server's loop). ``LiveServer(app).start()`` serves an
  app you built yourself.
* ``async with serving(app) as srv`` – serves the app on the *current* event loop (for async
  tests that call the session manager directly on the loop that owns it).

The server always stops when the block ends, pass or fail; a server that does not start or stop
in time raises ``RuntimeError`` saying so.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import uvicorn

if TYPE_CHECKING:
    from openenv.plugins import PluginManager
    from openenv.server import ServerContext

__all__ = ["HOST", "LiveServer", "bind_local", "live_server", "serving"]

#: Every test server binds here, and tests reach it here only.
HOST = "127.0.0.1"

T = TypeVar("T")


def bind_local() -> socket.socket:
    """A TCP socket bound to 127.0.0.1 on a port the OS picks.

    ``IPPROTO_TCP`` (not 0) so asyncio sets ``TCP_NODELAY`` on accepted connections; without it
    every small HTTP reply waits for the peer's delayed ACK (~40 ms).
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((HOST, 0))
    return sock


def _config(app: Any, ws_max_size: int | None, keep_alive_s: int = 5) -> uvicorn.Config:
    if ws_max_size is None:
        ctx = getattr(getattr(app, "state", None), "ctx", None)
        ws_max_size = ctx.config.max_message_bytes if ctx is not None else 16 * 1024 * 1024
    return uvicorn.Config(
        app, log_level="warning", lifespan="on", access_log=False, ws_max_size=ws_max_size,
        ws_per_message_deflate=False, ws_ping_interval=None, timeout_graceful_shutdown=5,
        timeout_keep_alive=keep_alive_s,
    )


class LiveServer:
    """uvicorn serving ``app`` on 127.0.0.1 from a background thread (see the module docs).

    The server's event loop runs on a thread named ``thread_name`` (default
    ``openenv-live-<port>``), so a test can tell what ran on the loop. ``keep_alive_s`` is how
    long uvicorn keeps an idle HTTP keep-alive connection open (its default, 5 s).
    """

    def __init__(self, app: Any, *, ws_max_size: int | None = None, start_timeout_s: float = 15.0,
                 stop_timeout_s: float = 20.0, thread_name: str | None = None,
                 keep_alive_s: int = 5) -> None:
        self.app = app
        self.sock = bind_local()
        self.port: int = self.sock.getsockname()[1]
        self.server = uvicorn.Server(_config(app, ws_max_size, keep_alive_s))
        self.loop: asyncio.AbstractEventLoop | None = None
        self.start_timeout_s = start_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=thread_name or f"openenv-live-{self.port}",
                                        daemon=True)

    @property
    def url(self) -> str:
        """The base URL (``http://127.0.0.1:<port>``)."""
        return f"http://{HOST}:{self.port}"

    @property
    def ws_url(self) -> str:
        """The ``/ws`` endpoint's URL."""
        return f"ws://{HOST}:{self.port}/ws"

    @property
    def ctx(self) -> ServerContext:
        """The app's ``ServerContext`` (session manager, config, transports)."""
        return self.app.state.ctx  # type: ignore[no-any-return]

    def _run(self) -> None:
        async def main() -> None:
            self.loop = asyncio.get_running_loop()
            await self.server.serve(sockets=[self.sock])

        try:
            asyncio.run(main())
        except BaseException as exc:  # reported by start(), which is waiting for the server
            self._error = exc

    def start(self) -> LiveServer:
        """Start serving; returns once uvicorn accepts connections."""
        self._thread.start()
        deadline = time.monotonic() + self.start_timeout_s
        while not self.server.started:
            if not self._thread.is_alive():
                self.sock.close()
                raise RuntimeError(f"the test server on {self.url} exited during start-up: {self._error!r}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the test server on {self.url} did not start within "
                                   f"{self.start_timeout_s:g}s")
            time.sleep(0.005)
        return self

    def stop(self) -> None:
        """Shut down (idempotent). Raises ``RuntimeError`` if the thread does not end in time."""
        self.server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(self.stop_timeout_s)
        self.sock.close()
        if self._thread.is_alive():
            raise RuntimeError(f"the test server on {self.url} did not stop within {self.stop_timeout_s:g}s")

    def call(self, coro: Coroutine[Any, Any, T], timeout_s: float = 10.0) -> T:
        """Run ``coro`` on the server's event loop and return its result (session manager calls
        are bound to that loop)."""
        if self.loop is None:
            coro.close()
            raise RuntimeError("the test server is not running")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    def __enter__(self) -> LiveServer:
        return self.start() if not self._thread.is_alive() else self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def live_server(
    env: Any,
    *,
    transports: list[str] | None = None,
    plugin_manager: PluginManager | None = None,
    ws_max_size: int | None = None,
    **settings: Any,
) -> Iterator[LiveServer]:
    """Serve ``env`` (a name, ``"module:Class"``, class or factory) with ``create_app`` on
    127.0.0.1 in a background thread; yield the running ``LiveServer``; always stop it.

    ``settings`` are ``ServerConfig`` fields (``max_sessions=2``, ``token=...``). Without
    ``plugin_manager`` the process-wide one (every installed plugin) is used.
    """
    from openenv.server import create_app

    app = create_app(env, transports=transports, plugin_manager=plugin_manager, **settings)
    server = LiveServer(app, ws_max_size=ws_max_size)
    server.start()
    try:
        yield server
    finally:
        server.stop()


class _InLoop:
    """What ``serving`` yields: the same read-only surface as ``LiveServer``."""

    def __init__(self, app: Any, port: int) -> None:
        self.app = app
        self.port = port

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://{HOST}:{self.port}/ws"

    @property
    def ctx(self) -> ServerContext:
        return self.app.state.ctx  # type: ignore[no-any-return]


@contextlib.asynccontextmanager
async def serving(app: Any, *, ws_max_size: int | None = None, start_timeout_s: float = 10.0,
                  stop_timeout_s: float = 10.0, keep_alive_s: int = 5) -> AsyncIterator[_InLoop]:
    """Serve ``app`` on the running event loop (127.0.0.1, a free port) for the block's duration.

    ``keep_alive_s`` is how long an idle HTTP keep-alive connection stays open (uvicorn's 5 s).
    """
    sock = bind_local()
    server = uvicorn.Server(_config(app, ws_max_size, keep_alive_s))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        deadline = time.monotonic() + start_timeout_s
        while not server.started:
            if task.done():
                raise RuntimeError(f"the test server exited during start-up: {task.exception()!r}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the test server did not start within {start_timeout_s:g}s")
            await asyncio.sleep(0.005)
        yield _InLoop(app, sock.getsockname()[1])
    finally:
        server.should_exit = True
        try:
            await asyncio.wait_for(asyncio.shield(task), stop_timeout_s)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        except BaseException:  # a start-up failure was already raised above
            pass
        sock.close()
