"""Waiting until an env server in a container (or a Swarm task) is ready, from the host.

Ready means both:

1. ``GET /health`` answers 200 (spec §5.1), and
2. one protocol round-trip on ``/ws``: connect, send ``{"type":"state"}``, receive a ``state`` (or
   any non-fatal) frame, send ``{"type":"close"}`` and wait until the server closes the socket.
   The server frees the probe's session before it closes, so a ``max_sessions=1`` server is free
   again when the caller's client connects. A server that answers the upgrade with 404 has no
   ``/ws`` (an HTTP-only image); for it ``/health`` is all we can check.

``wait_until_ready`` polls with a short back-off, asks ``exited()`` before every probe so that a
server that died during start-up is reported at once (``RuntimeError`` with its log tail), and
raises ``TimeoutError`` with the last reason and the log tail at the deadline. Connections go
straight to the given address: environment proxy settings are ignored (the address is loopback).
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

__all__ = ["NotReady", "ProbeFailed", "probe", "wait_until_ready"]


class NotReady(Exception):
    """Not ready yet; retrying may help. The message says what is missing."""


class ProbeFailed(RuntimeError):
    """The server answers but can never become usable (bad token, failing env factory)."""


def _http_get(base_url: str, path: str, headers: dict[str, str], timeout_s: float) -> int:
    parts = urlsplit(base_url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80,
                                      timeout=timeout_s)
    try:
        conn.request("GET", (parts.path.rstrip("/") or "") + path, headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status
    finally:
        conn.close()


def probe(base_url: str, *, token: str | None = None, timeout_s: float = 5.0) -> str:
    """Check the server once; returns ``"ws"`` or ``"http"`` (what could be checked).

    Raises ``NotReady`` (retry) or ``ProbeFailed`` (retrying cannot help).
    """
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        status = _http_get(base_url, "/health", headers, timeout_s)
    except (OSError, http.client.HTTPException) as exc:
        raise NotReady(f"GET /health failed: {type(exc).__name__}: {exc}") from None
    if status != 200:
        raise NotReady(f"GET /health answered HTTP {status}")
    return _ws_round_trip(base_url, headers, timeout_s)


def _ws_round_trip(base_url: str, headers: dict[str, str], timeout_s: float) -> str:
    from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
    from websockets.sync.client import connect

    url = "ws" + base_url[len("http"):].rstrip("/") + "/ws"
    try:
        with connect(url, additional_headers=headers, open_timeout=timeout_s, proxy=None,
                     close_timeout=timeout_s, max_size=None, compression=None) as ws:
            ws.send('{"type":"state"}')
            reply: Any = json.loads(ws.recv(timeout=timeout_s))
            kind = reply.get("type") if isinstance(reply, dict) else None
            if kind == "error":
                data = reply.get("data") or {}
                if data.get("code") in ("FACTORY_ERROR", "SESSION_ERROR"):
                    raise ProbeFailed(f"the env cannot start a session: {data.get('message')}")
                if data.get("code") == "CAPACITY_REACHED":
                    raise NotReady("the server is at capacity")
            elif kind != "state":
                raise ProbeFailed(f"unexpected reply to a 'state' frame on /ws: {reply!r}")
            ws.send('{"type":"close"}')
            try:
                ws.recv(timeout=timeout_s)  # returns only by the server closing the socket
            except ConnectionClosed:
                pass
    except InvalidStatus as exc:
        status = exc.response.status_code
        if status in (401, 403):
            raise ProbeFailed(f"the server refused the token on /ws (HTTP {status})") from None
        if status == 404:
            return "http"  # no /ws transport in this image: /health is all there is to check
        raise NotReady(f"/ws upgrade answered HTTP {status}") from None
    except (OSError, InvalidHandshake, TimeoutError) as exc:
        raise NotReady(f"/ws round-trip failed: {type(exc).__name__}: {exc}") from None
    except ConnectionClosed as exc:
        raise NotReady(f"/ws closed during the round-trip: {exc}") from None
    return "ws"


def wait_until_ready(
    base_url: str,
    *,
    timeout_s: float,
    token: str | None = None,
    exited: Callable[[], str | None] = lambda: None,
    log_tail: Callable[[], str] = lambda: "",
    what: str = "server",
) -> str:
    """Poll ``probe`` until it passes; returns what was checked (``"ws"``/``"http"``).

    ``exited()`` returns a description (``"exited with code 1"``) once the server is gone, else
    ``None``. Raises ``RuntimeError`` if it exits or can never be ready, ``TimeoutError`` after
    ``timeout_s``; both messages end with the log tail.
    """
    deadline = time.monotonic() + timeout_s
    delay = 0.02
    reason = "no probe yet"
    while True:
        gone = exited()
        if gone is not None:
            raise RuntimeError(f"{what} {gone} during start-up.{_tail(log_tail)}")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"{what} not ready after {timeout_s:g}s (last check: {reason})."
                               f"{_tail(log_tail)}")
        try:
            return probe(base_url, token=token, timeout_s=max(0.2, min(5.0, remaining)))
        except NotReady as exc:
            reason = str(exc)
        except ProbeFailed as exc:
            raise RuntimeError(f"{what} answers but cannot serve: {exc}.{_tail(log_tail)}") from None
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 1.5, 0.25)


def _tail(log_tail: Callable[[], str]) -> str:
    try:
        text = log_tail().strip()
    except Exception as exc:  # the logs are a courtesy: never hide the real error behind them
        text = f"(logs unavailable: {exc})"
    return f"\n--- last log lines ---\n{text}" if text else " (no log output)"
