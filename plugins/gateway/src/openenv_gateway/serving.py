"""Serve an ASGI app on 127.0.0.1 in a background thread (the gateway, and the test upstreams)."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any, Literal

__all__ = ["ThreadServer"]


class ThreadServer:
    """uvicorn on a loopback socket bound before ``start()`` returns, so the URL works at once."""

    def __init__(self, app: Any, port: int = 0, lifespan: Literal["on", "off"] = "off") -> None:
        self.app, self.port, self.lifespan = app, port, lifespan
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self.base_url = ""

    def start(self, ready_timeout_s: float = 10.0) -> str:
        import uvicorn

        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))  # loopback only, never a public interface
        sock.listen(1024)
        # httptools and uvloop when installed (uvicorn's "auto"); no access log and no proxy-header
        # rewriting: each costs CPU on every call, and nothing but local clients ever connects here
        config = uvicorn.Config(self.app, log_level="warning", lifespan=self.lifespan, access_log=False,
                                proxy_headers=False, interface="asgi3", timeout_graceful_shutdown=5)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [sock]}, daemon=True,
                                        name="openenv-gateway-server")
        self._thread.start()
        deadline = time.monotonic() + ready_timeout_s
        while not self._server.started and time.monotonic() < deadline and self._thread.is_alive():
            time.sleep(0.01)
        if not self._server.started:
            raise RuntimeError(f"the server thread did not start within {ready_timeout_s:g}s")
        self.base_url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        return self.base_url

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._thread = self._server = None
