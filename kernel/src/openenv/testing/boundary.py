"""Testing a provider at its vendor's boundary: a local stand-in of the service, a killed client.

Cloud providers are tested with the vendor's real SDK against a local server on 127.0.0.1 that
speaks the vendor's protocol. Two pieces every such test needs::

    from openenv.testing.boundary import orphan_from, self_signed_cert

    cert, key = self_signed_cert(tmp_path)          # TLS for a stand-in that must speak https
    orphan_id = orphan_from([sys.executable, "helpers_orphan.py", ...])

* ``self_signed_cert(directory)`` – a fresh certificate and key for ``127.0.0.1`` (Debian's
  ``openssl``), for a stand-in whose SDK or URLs insist on ``https://``; point the client at it with
  ``REQUESTS_CA_BUNDLE`` / ``SSL_CERT_FILE``.
* ``StandIn(app, name, certfile=, keyfile=)`` – the stand-in's ASGI app on a uvicorn thread on
  127.0.0.1 (``https`` with a certificate); ``start()`` waits, bounded, and returns the URL.
* ``free_port()`` – a TCP port on 127.0.0.1 that is free right now (for a stand-in, or a server
  the provider is told to listen on).
* ``orphan_from(argv)`` – run a helper that starts a server through the provider and prints the
  handle id as its first line, SIGKILL the helper once it has, and return the id: the server now
  belongs to a dead owner, which is what ``ProviderContract(orphan=...)`` needs for
  ``check_gc_dead_owner``.

Failures raise ``ContractError`` with what the child said, so nothing here needs pytest.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from openenv.testing.errors import ContractError

__all__ = ["StandIn", "free_port", "orphan_from", "self_signed_cert"]


def _exact_date(app: Any) -> Any:
    """``app`` with the ``Date`` header a vendor's server sends: the time of this response.
    uvicorn's own is refreshed once a second by its main loop and lags further under load; an SDK
    that compares it with event timestamps (huggingface_hub's job logs stop at the first event
    after ``Date`` + 1 s) would then drop events that a real server sends."""
    from email.utils import formatdate

    async def dated(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return

        async def send_dated(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                if not any(name.lower() == b"date" for name, _ in headers):
                    headers.append((b"date", formatdate(usegmt=True).encode()))
                message = {**message, "headers": headers}
            await send(message)

        await app(scope, receive, send_dated)

    return dated


class StandIn:
    """A vendor stand-in's ASGI ``app`` served by uvicorn on a background thread on 127.0.0.1
    (``https`` when ``certfile``/``keyfile`` are given). ``start()`` returns the URL once uvicorn
    has started and raises ``RuntimeError`` naming ``name`` if its thread died or 15 s passed;
    ``stop()`` is idempotent. Each HTTP response carries the exact ``Date`` of its sending, as a
    vendor's server does."""

    def __init__(self, app: Any, name: str, *, certfile: str | None = None, keyfile: str | None = None) -> None:
        self.app, self.name, self.certfile, self.keyfile = app, name, certfile, keyfile
        self.url = ""
        self._server: Any = None
        self._thread: threading.Thread | None = None

    def start(self) -> str:
        import uvicorn

        from openenv.testing.waiting import wait_until

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        scheme = "https" if self.certfile else "http"
        self.url = f"{scheme}://127.0.0.1:{sock.getsockname()[1]}"
        # A bounded graceful shutdown: a client that keeps its TLS connection open (an SDK's pooled
        # keep-alive) never answers the close, and uvicorn would wait for it forever.
        server = uvicorn.Server(uvicorn.Config(_exact_date(self.app), log_level="warning", lifespan="off",
                                               ssl_certfile=self.certfile, ssl_keyfile=self.keyfile,
                                               timeout_graceful_shutdown=1, date_header=False))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        self._server, self._thread = server, thread
        thread.start()
        wait_until(lambda: server.started or not thread.is_alive(), timeout_s=15)
        if not server.started:
            self.stop()
            raise RuntimeError(f"the {self.name} stand-in on {self.url} did not start "
                               "(its thread exited, or 15 s passed)")
        return self.url

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
        self._server = self._thread = None


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def self_signed_cert(directory: str | os.PathLike[str]) -> tuple[str, str]:
    """``(cert, key)`` paths of a fresh self-signed certificate for ``127.0.0.1``, valid one day."""
    cert, key = Path(directory) / "cert.pem", Path(directory) / "key.pem"
    try:
        subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                        "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
                        "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True, timeout=60)
    except FileNotFoundError:
        raise ContractError("self_signed_cert needs the openssl command: apt-get install openssl") from None
    except subprocess.CalledProcessError as exc:
        raise ContractError(f"openssl could not make a certificate: {exc.stderr.decode(errors='replace')}") from None
    return str(cert), str(key)


def orphan_from(argv: Sequence[str], *, env: Mapping[str, str] | None = None, timeout_s: float = 180.0) -> str:
    """Run ``argv`` (this process's environment, or ``env``), wait at most ``timeout_s`` for its first
    stdout line (the handle id of the server it started), SIGKILL it, and return that line."""
    with tempfile.TemporaryFile() as errors:
        proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=errors,
                                text=True, env=dict(os.environ if env is None else env))
        line: list[str] = []
        assert proc.stdout is not None
        # readline() blocks with no timeout of its own: read in a thread so a hung helper is bounded.
        reader = threading.Thread(target=lambda: line.append(proc.stdout.readline() if proc.stdout else ""),
                                  daemon=True)
        reader.start()
        reader.join(timeout_s)
        timed_out = reader.is_alive()
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        reader.join(5)
        proc.stdout.close()
        found = line[0].strip() if line else ""
        if not found:
            errors.seek(0)
            why = f"printed nothing within {timeout_s:g}s" if timed_out else "ended without printing a handle id"
            raise ContractError(f"the orphan helper {' '.join(argv)} {why} (exit {proc.returncode}); its "
                                f"stderr:\n{errors.read().decode(errors='replace')[-4000:]}")
    return found
