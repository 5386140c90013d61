"""Port-forward through the API server, exposed on a local 127.0.0.1 port by a small thread.

``PortForward(configuration, namespace, pod, port)`` listens on ``127.0.0.1:<free port>`` (``local_port``);
each accepted TCP connection gets its own port-forward stream through the API server to the Pod's
``port`` (``kubernetes.stream.portforward``: a WebSocket to ``pods/<name>/portforward``), and one
thread copies bytes both ways until either side closes. The client's ``portforward`` swaps a method
of the API client it is given while it connects, so every ``PortForward`` has an API client of its
own (same configuration) and opens its streams one at a time: other requests never go astray.
Nothing listens on any other address. ``close()`` stops accepting, ends every open stream and is
idempotent. A stream that cannot be opened (the Pod is gone, the API server refuses) closes the
local connection at once; the last such error is kept in ``last_error`` for diagnostics, and a
refusal by the API server (401/403, e.g. no ``pods/portforward`` rule) as ``refused``: our
``AccessDenied`` naming the missing rule, which the handle raises instead of waiting for a timeout.
"""

from __future__ import annotations

import logging
import selectors
import socket
import threading
from typing import Any

from openenv_provider_kubernetes.cluster import handshake_error

__all__ = ["PortForward"]

log = logging.getLogger("openenv.provider.kubernetes")
_CHUNK = 256 * 1024


class PortForward:
    """A local listener whose connections are tunnelled to one Pod port through the API server."""

    def __init__(self, configuration: Any, namespace: str, pod: str, port: int, *, timeout_s: float = 10.0) -> None:
        from kubernetes import client

        self._api_client = client.ApiClient(configuration)
        self._core = client.CoreV1Api(self._api_client)
        self._connect_lock = threading.Lock()
        self.namespace = namespace
        self.pod = pod
        self.port = port
        self._timeout_s = timeout_s
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.local_port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._closed = False
        self.last_error: str | None = None
        #: Our error (``AccessDenied``) once the API server refused a stream with 401/403.
        self.refused: BaseException | None = None
        self.connections = 0
        self._thread = threading.Thread(target=self._accept_loop, name=f"k8s-forward-{pod}", daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.local_port}"

    def _accept_loop(self) -> None:
        while True:
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return  # closed
            with self._lock:
                if self._closed:
                    conn.close()
                    return
                self._open.add(conn)
                self.connections += 1
            threading.Thread(target=self._serve, args=(conn,), name=f"k8s-forward-{self.pod}-conn",
                             daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        from kubernetes.stream import portforward

        forward = None
        try:
            with self._connect_lock:
                forward = portforward(self._core.connect_get_namespaced_pod_portforward, self.pod,
                                      self.namespace, ports=str(self.port), _request_timeout=self._timeout_s)
            remote = forward.socket(self.port)
            remote.setblocking(True)
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._pump(conn, remote)
            error = forward.error(self.port)
            if error:
                self.last_error = str(error)
        except Exception as exc:
            self.last_error = f"{type(exc).__name__}: {exc}"
            # A refusal (401/403: a missing pods/portforward rule) never heals: kept for the handle.
            self.refused = self.refused or handshake_error(
                exc, doing=f"opening a port-forward to the Pod {self.namespace}/{self.pod}",
                server=str(self._api_client.configuration.host))
            log.debug("port-forward to %s/%s:%s failed: %s", self.namespace, self.pod, self.port, exc)
        finally:
            with self._lock:
                self._open.discard(conn)
            _close(conn)
            if forward is not None:
                try:
                    forward.close()
                except Exception:
                    pass

    @staticmethod
    def _pump(conn: socket.socket, remote: Any) -> None:
        sel = selectors.DefaultSelector()
        sel.register(conn, selectors.EVENT_READ, remote)
        sel.register(remote, selectors.EVENT_READ, conn)
        try:
            while True:
                for key, _ in sel.select():
                    source = key.fileobj
                    data = source.recv(_CHUNK)  # type: ignore[union-attr]
                    if not data:
                        return
                    key.data.sendall(data)
        except OSError:
            return
        finally:
            sel.close()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            conns = list(self._open)
        _close(self._listener)
        for conn in conns:
            _close(conn)
        try:
            self._api_client.close()
        except Exception:
            pass

    @property
    def closed(self) -> bool:
        return self._closed


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    try:
        sock.close()
    except OSError:
        pass
