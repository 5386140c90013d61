"""Readiness of a freshly started env server, checked from the outside (what every provider needs).

``probe(base_url)`` checks once. Ready means:

1. ``GET /health`` answers 200 (docs/protocol.md §5.1);
2. ``GET /capabilities`` does not refuse the token (401/403 can never get better: ``ProbeFailed``);
   when it answers, its ``transports`` list says whether the server has ``/ws``;
3. one real protocol round-trip on ``/ws``, when the server has it (or does not say: an upstream
   server without ``/capabilities``) and the ``websockets`` library is importable here: connect,
   ``{"type":"state"}``, get a reply frame, ``{"type":"close"}``, and wait for the server to close
   the socket. Waiting for that close matters: the server frees the probe's session before it
   closes, so a ``max_sessions=1`` server is free again when the caller connects. A server that
   answers the upgrade with 404 has no ``/ws`` (an HTTP-only image): ``/health`` and
   ``/capabilities`` are then all there is to check. A refused upgrade is a refused token
   (``ProbeFailed``) for 401, and for 403 where ``/capabilities`` did not answer (Starlette also
   answers 403 for a path without a WebSocket route); any other refusal is ``NotReady``.

**Without websockets** (only the kernel's own dependencies installed) the check is ``/health`` +
``GET /capabilities``, and ``probe`` says so by returning ``"http"``; ``mode="ws"`` then fails
with ``ProbeFailed`` naming the missing library. The kernel imports ``websockets`` only inside the
round-trip, never at module import.

Reply policy of the round-trip: ``FACTORY_ERROR``/``SESSION_ERROR`` (the env cannot start a
session) and a reply that is not a frame are ``ProbeFailed``; ``CAPACITY_REACHED`` is ``NotReady``
(a slot held by an earlier probe whose close the server has not finished; retrying frees it);
any other error frame is a working server answering (ready).

``wait_until_ready(...)`` polls ``probe`` with a short back-off until it passes. Before every
probe it asks ``exited()``, so that a server that died during start-up is reported at once
(``RuntimeError`` with its log tail); a ``ProbeFailed`` is a ``RuntimeError`` with the log tail
too; at the deadline it raises ``TimeoutError`` with the last reason and the log tail. Every
connection goes straight to the given address: proxy settings from the environment are ignored.
"""

from __future__ import annotations

import http.client
import inspect
import json
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from openenv.urls import ws_base_url

__all__ = [
    "MODES",
    "STARTUP_HINT",
    "NotReady",
    "ProbeFailed",
    "have_websockets",
    "http_get",
    "log_tail_text",
    "probe",
    "wait_until_ready",
]

#: ``probe`` modes: round-trip on ``/ws`` when possible (``auto``), always (``ws``), never (``http``).
MODES = ("auto", "ws", "http")
#: The default advice at the end of a start-up timeout message.
STARTUP_HINT = "Raise LaunchSpec.startup_timeout_s if it is just slow."
_STATE_FRAME = '{"type":"state"}'
_CLOSE_FRAME = '{"type":"close"}'


class NotReady(Exception):
    """Not ready yet; retrying may help. The message says what is missing."""


class ProbeFailed(RuntimeError):
    """The server answers but can never become usable (bad token, failing env factory)."""


def http_get(base_url: str, path: str, *, headers: dict[str, str] | None = None,
             timeout_s: float = 2.0) -> tuple[int, bytes]:
    """``GET`` ``path`` under ``base_url`` (its path prefix kept); returns ``(status, body)``.

    Raises ``OSError`` or ``http.client.HTTPException`` when the server cannot be reached or does
    not speak HTTP. No proxy is ever used.
    """
    parts = urlsplit(base_url)
    default_port = 443 if parts.scheme == "https" else 80
    conn_cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = conn_cls(parts.hostname or "127.0.0.1", parts.port or default_port, timeout=timeout_s)
    try:
        conn.request("GET", parts.path.rstrip("/") + path, headers=headers or {})
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def have_websockets() -> bool:
    """Whether the ``websockets`` sync client can be imported here (it is optional for the kernel)."""
    try:
        import websockets.sync.client  # noqa: F401
    except ImportError:
        return False
    return True


def probe(base_url: str, *, token: str | None = None, timeout_s: float = 5.0, mode: str = "auto") -> str:
    """Check the server once; returns what was checked: ``"ws"`` or ``"http"``.

    Raises ``NotReady`` (retry) or ``ProbeFailed`` (retrying cannot help), and ``ValueError`` for a
    ``mode`` that is not one of ``MODES``.
    """
    if mode not in MODES:
        raise ValueError(f"Unknown readiness probe mode {mode!r}: use one of {', '.join(MODES)}.")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    status, _ = _get(base_url, "/health", headers, timeout_s)
    if status != 200:
        raise NotReady(f"GET /health answered HTTP {status}")
    status, body = _get(base_url, "/capabilities", headers, timeout_s)
    if status in (401, 403):
        raise ProbeFailed(f"the server refused the token (GET /capabilities answered HTTP {status})")
    transports = _transports(body) if status == 200 else None
    if mode == "http":
        return "http"
    if mode == "auto" and transports is not None and "ws" not in transports:
        return "http"
    if not have_websockets():
        if mode == "ws":
            raise ProbeFailed("probe mode 'ws' needs the websockets library here: "
                              "`pip install websockets`, or use probe mode 'auto' or 'http'")
        return "http"
    return _ws_round_trip(base_url, headers, timeout_s, required=mode == "ws", transports=transports)


def _get(base_url: str, path: str, headers: dict[str, str], timeout_s: float) -> tuple[int, bytes]:
    try:
        return http_get(base_url, path, headers=headers, timeout_s=timeout_s)
    except (OSError, http.client.HTTPException) as exc:
        raise NotReady(f"GET {path} failed: {type(exc).__name__}: {exc}") from None


def _transports(body: bytes) -> list[str] | None:
    """The ``transports`` a ``/capabilities`` body lists, or ``None`` if it does not say."""
    try:
        found = json.loads(body).get("transports")
    except (ValueError, AttributeError):
        return None
    return [str(t) for t in found] if isinstance(found, list) else None


def _ws_round_trip(base_url: str, headers: dict[str, str], timeout_s: float, *, required: bool,
                   transports: list[str] | None) -> str:
    from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
    from websockets.sync.client import connect

    url = ws_base_url(base_url) + "/ws"
    kwargs: dict[str, Any] = {}
    if "proxy" in inspect.signature(connect).parameters:  # websockets >= 15 honours proxy settings
        kwargs["proxy"] = None
    try:
        with connect(url, additional_headers=headers, open_timeout=timeout_s, close_timeout=timeout_s,
                     max_size=None, compression=None, **kwargs) as ws:
            ws.send(_STATE_FRAME)
            _check_reply(ws.recv(timeout=timeout_s))
            ws.send(_CLOSE_FRAME)
            try:
                ws.recv(timeout=timeout_s)  # returns only by the server closing the socket
            except ConnectionClosed:
                pass
    except InvalidStatus as exc:
        status = exc.response.status_code
        # 403 is also how Starlette refuses an upgrade to a path it has no WebSocket route for, so
        # it means a refused token only where /capabilities (behind the same auth) did not answer.
        if status == 401 or (status == 403 and transports is None):
            raise ProbeFailed(f"the server refused the token on /ws (HTTP {status})") from None
        if status == 404 and not required:
            return "http"  # no /ws on this server: /health and /capabilities are all there is
        listed = "" if transports is None or "ws" in transports else \
            f" (the server lists no 'ws' transport: {', '.join(transports) or 'none'})"
        raise NotReady(f"/ws upgrade answered HTTP {status}{listed}") from None
    except (OSError, InvalidHandshake, TimeoutError) as exc:
        raise NotReady(f"/ws round-trip failed: {type(exc).__name__}: {exc}") from None
    except ConnectionClosed as exc:
        raise NotReady(f"/ws closed during the round-trip: {exc}") from None
    return "ws"


def _check_reply(raw: str | bytes) -> None:
    """Judge the reply to the probe's ``state`` frame (see the module docstring's policy)."""
    try:
        reply: Any = json.loads(raw)
    except ValueError:
        raise ProbeFailed(f"the reply to a 'state' frame on /ws is not JSON: {raw[:200]!r}") from None
    kind = reply.get("type") if isinstance(reply, dict) else None
    if kind == "state":
        return
    if kind != "error":
        raise ProbeFailed(f"unexpected reply to a 'state' frame on /ws: {reply!r}")
    data = reply.get("data") if isinstance(reply.get("data"), dict) else {}
    code = data.get("code")
    if code in ("FACTORY_ERROR", "SESSION_ERROR"):
        detail = f" {data['detail']}" if data.get("detail") else ""
        raise ProbeFailed(f"the env cannot start a session: {data.get('message')}{detail}")
    if code == "CAPACITY_REACHED":
        raise NotReady("the server is at capacity")


def log_tail_text(log_tail: Callable[[], str], source: str | None = None) -> str:
    """The log tail as the end of an error message: a headed block, or a note that there is none.

    ``source`` (a log file's path) is named when given. A failure to read the logs never hides the
    error the tail is attached to: it is reported in the tail's place.
    """
    try:
        text = log_tail().strip()
    except Exception as exc:  # the logs are a courtesy: never hide the real error behind them
        text = f"(logs unavailable: {exc})"
    if text:
        of = f" of {source}" if source else ""
        return f"\n--- last log lines{of} ---\n{text}"
    return f" (no log output in {source})" if source else " (no log output)"


def _never() -> str | None:
    return None


def _no_logs() -> str:
    return ""


def wait_until_ready(
    base_url: str | Callable[[], str | None],
    *,
    timeout_s: float,
    token: str | None = None,
    mode: str = "auto",
    exited: Callable[[], str | None] = _never,
    log_tail: Callable[[], str] = _no_logs,
    log_source: str | None = None,
    what: str = "server",
    hint: str = STARTUP_HINT,
    max_interval_s: float = 0.1,
) -> str:
    """Poll ``probe`` until it passes; returns what was checked (``"ws"``/``"http"``).

    ``base_url`` may be a callable that returns ``None`` until the server has said where it
    listens (a ready file). ``exited()`` returns a description (``"exited with code 1"``) once the
    server is gone, else ``None``; it is asked before every probe. Raises ``RuntimeError`` if the
    server exits or can never be ready and ``TimeoutError`` after ``timeout_s`` (with ``hint``);
    every message starts with ``what`` and ends with the log tail (``log_tail_text``). The pause
    between probes grows from 10 ms to ``max_interval_s``.
    """
    if mode not in MODES:
        raise ValueError(f"Unknown readiness probe mode {mode!r}: use one of {', '.join(MODES)}.")
    deadline = time.monotonic() + timeout_s
    delay = 0.01
    checks = 0
    reason = "the server has not said where it listens yet"
    while True:
        gone = exited()
        if gone is not None:
            raise RuntimeError(f"{what} {gone} during start-up.{log_tail_text(log_tail, log_source)}")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            plural = "check" if checks == 1 else "checks"
            raise TimeoutError(
                f"{what} did not become ready within {timeout_s:g}s: still not ready after {checks} "
                f"{plural} (last: {reason}). {hint}".rstrip() + log_tail_text(log_tail, log_source))
        url = base_url() if callable(base_url) else base_url
        if url:
            checks += 1
            try:
                return probe(url, token=token, timeout_s=max(0.2, min(5.0, remaining)), mode=mode)
            except NotReady as exc:
                reason = str(exc)
            except ProbeFailed as exc:
                raise RuntimeError(f"{what} answers at {url} but cannot serve: {exc}."
                                   f"{log_tail_text(log_tail, log_source)}") from None
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 1.5, max_interval_s)
