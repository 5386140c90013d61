"""Readiness checks of a freshly started env server, from the outside.

Ready means: ``GET /health`` answers 200, ``GET /capabilities`` answers (the app and its
transports are mounted), and, when the server serves ``/ws`` and the ``websockets`` library is
importable here, one real protocol round-trip: connect, ``{"type":"state"}``, get a reply frame,
``{"type":"close"}``, and wait for the server to close the connection. Waiting for that close
matters: the server frees the probe's session slot before it closes, so a single-session server
is free again when the caller connects.
"""

from __future__ import annotations

import http.client
import json
from typing import Any

__all__ = ["NotReady", "ProbeFailed", "http_get", "probe"]


class NotReady(Exception):
    """The server is not (yet) ready; the message says what is missing."""


class ProbeFailed(RuntimeError):
    """The server answers but can never work (e.g. its env factory raises)."""


def http_get(base_url: str, path: str, *, headers: dict[str, str] | None = None,
             timeout_s: float = 2.0) -> tuple[int, bytes]:
    """``GET base_url + path``; returns ``(status, body)``; raises ``OSError`` if unreachable."""
    rest = base_url.split("://", 1)[1]
    hostport = rest.split("/", 1)[0]
    host, _, port = hostport.rpartition(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout_s)
    try:
        conn.request("GET", path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def probe(base_url: str, *, token: str | None = None, timeout_s: float = 5.0, mode: str = "auto") -> str:
    """Check the server once. Returns what was checked (``"ws"`` or ``"http"``).

    Raises ``NotReady`` when it should be retried and ``ProbeFailed`` when retrying cannot help.
    ``mode``: ``"auto"`` (round-trip over ``/ws`` when possible), ``"ws"`` or ``"http"``.
    """
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        status, _ = http_get(base_url, "/health", timeout_s=timeout_s)
    except OSError as exc:
        raise NotReady(f"GET /health failed: {exc}") from None
    if status != 200:
        raise NotReady(f"GET /health answered {status}")
    try:
        status, body = http_get(base_url, "/capabilities", headers=headers, timeout_s=timeout_s)
    except OSError as exc:
        raise NotReady(f"GET /capabilities failed: {exc}") from None
    if status == 401:
        raise ProbeFailed("the server refused the token (GET /capabilities answered 401)")
    transports: list[str] = []
    if status == 200:
        try:
            transports = list(json.loads(body).get("transports", []))
        except (ValueError, AttributeError):
            transports = []
    want_ws = mode == "ws" or (mode == "auto" and "ws" in transports and _have_websockets())
    if not want_ws:
        return "http"
    _ws_round_trip(base_url, headers, timeout_s)
    return "ws"


def _have_websockets() -> bool:
    try:
        import websockets.sync.client  # noqa: F401
    except ImportError:
        return False
    return True


def _ws_round_trip(base_url: str, headers: dict[str, str], timeout_s: float) -> None:
    from websockets.exceptions import ConnectionClosed, InvalidHandshake
    from websockets.sync.client import connect

    url = "ws" + base_url[len("http"):] + "/ws"
    try:
        with connect(url, additional_headers=headers, open_timeout=timeout_s,
                     close_timeout=timeout_s, max_size=None, compression=None) as ws:
            ws.send('{"type":"state"}')
            reply: Any = json.loads(ws.recv(timeout=timeout_s))
            kind = reply.get("type") if isinstance(reply, dict) else None
            if kind == "error":
                data = reply.get("data") or {}
                if data.get("code") == "FACTORY_ERROR":
                    raise ProbeFailed(f"the env factory fails: {data.get('message')} "
                                      f"{data.get('detail', '')}".strip())
            elif kind != "state":
                raise ProbeFailed(f"unexpected reply to a state frame on /ws: {reply!r}")
            ws.send('{"type":"close"}')
            try:
                ws.recv(timeout=timeout_s)  # the server closes after freeing the session
            except ConnectionClosed:
                pass
    except (OSError, InvalidHandshake, TimeoutError) as exc:
        raise NotReady(f"/ws round-trip failed: {type(exc).__name__}: {exc}") from None
    except ConnectionClosed as exc:
        raise NotReady(f"/ws closed during the round-trip: {exc}") from None
