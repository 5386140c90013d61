"""The Ray actor that holds one env server: ``openenv serve`` inside a Ray worker process.

The class is plain Python; the provider turns it into an actor with ``ray.remote`` (so importing
this module never imports Ray). It runs as a *threaded* actor: ``start`` binds the socket and runs
uvicorn on a thread of its own, and ``wait_closed`` blocks (on another actor thread) until that
server stops, which is how the driver notices a server that died without polling it.

Secrets (``env_vars``, the token) arrive as constructor arguments, never through the worker's
command line or the actor's ``runtime_env`` (both are visible to every user of the cluster).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
import time
from collections import deque
from typing import Any

__all__ = ["EnvServerActor"]

#: How many log lines the actor keeps for ``RayHandle.logs``.
LOG_LINES = 200


class _TailHandler(logging.Handler):
    """Keeps the last log records of the server (the driver reads them through ``logs``)."""

    def __init__(self, lines: deque[str]) -> None:
        super().__init__(logging.INFO)
        self.lines = lines
        self.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):
            self.lines.append(self.format(record))


class EnvServerActor:
    """One env server bound to ``host`` on a free port inside this Ray worker."""

    def __init__(self, env: str, config: dict[str, Any], env_vars: dict[str, str],
                 log_level: str = "info") -> None:
        os.environ.update({str(k): str(v) for k, v in env_vars.items()})
        self._env = env
        self._config = dict(config)
        self._log_level = log_level
        self._lines: deque[str] = deque(maxlen=LOG_LINES)
        handler = _TailHandler(self._lines)
        for name in ("openenv", "uvicorn", "uvicorn.error"):
            logging.getLogger(name).addHandler(handler)
        logging.getLogger("openenv").setLevel(logging.INFO)
        self._server: Any = None
        self._thread: threading.Thread | None = None
        self._done = threading.Event()
        self._error: str | None = None
        self._port: int | None = None
        self._started_at = time.time()

    # -- start ------------------------------------------------------------------------------------

    def start(self, timeout_s: float = 60.0) -> dict[str, Any]:
        """Build the app, bind, serve on a thread; return where it listens once uvicorn started."""
        import uvicorn

        from openenv.server import ServerConfig, create_app

        if self._config.get("host") == "node":  # bind="node": this node's IP, for other nodes' drivers
            import ray

            self._config["host"] = ray.util.get_node_ip_address()
        cfg = ServerConfig(**self._config)
        app = create_app(self._env, config=cfg)
        sock = socket.socket(socket.AF_INET6 if ":" in cfg.host else socket.AF_INET, socket.SOCK_STREAM,
                             socket.IPPROTO_TCP)  # IPPROTO_TCP: asyncio then sets TCP_NODELAY
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((cfg.host, 0))
        self._port = cfg.port = sock.getsockname()[1]
        self._server = uvicorn.Server(uvicorn.Config(
            app, host=cfg.host, port=self._port, log_level=self._log_level,
            ws_max_size=cfg.max_message_bytes, ws_ping_interval=cfg.ping_interval_s,
            ws_ping_timeout=cfg.ping_timeout_s, ws_per_message_deflate=False, lifespan="on",
            access_log=False, timeout_graceful_shutdown=5,
        ))
        self._thread = threading.Thread(target=self._serve, args=(sock,), name="openenv-server",
                                        daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started and not self._done.is_set():
            if time.monotonic() > deadline:
                raise TimeoutError(f"uvicorn did not start within {timeout_s:g}s")
            time.sleep(0.01)
        if self._done.is_set():
            raise RuntimeError(f"the env server stopped during start-up: {self._error or 'no error'}\n"
                               + self.logs(30))
        return self.info()

    def _serve(self, sock: socket.socket) -> None:
        try:
            asyncio.run(self._server.serve(sockets=[sock]))
        except BaseException as exc:  # reported through wait_closed / start
            self._error = f"{type(exc).__name__}: {exc}"
        finally:
            with contextlib.suppress(OSError):
                sock.close()
            self._done.set()

    # -- queries ----------------------------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        """Where the server listens and which process serves it."""
        import ray

        return {"host": self._config.get("host", "127.0.0.1"), "port": self._port, "pid": os.getpid(),
                "env": self._env, "node_id": ray.get_runtime_context().get_node_id(),
                "running": self._server is not None and not self._done.is_set(),
                "started_at": self._started_at}

    def logs(self, tail: int = 50) -> str:
        """The last ``tail`` log lines of the server."""
        return "\n".join(list(self._lines)[-tail:]) if tail > 0 else ""

    def wait_closed(self) -> str:
        """Block until the server stops; return why (its error, or ``"stopped"``)."""
        self._done.wait()
        return self._error or "stopped"

    # -- stop -------------------------------------------------------------------------------------

    def shutdown(self, timeout_s: float = 5.0) -> bool:
        """Ask uvicorn to exit and wait up to ``timeout_s``; True if it did."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout_s)
            return not self._thread.is_alive()
        return True
