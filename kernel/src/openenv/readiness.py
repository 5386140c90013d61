"""Readiness of a freshly started env server, checked from the outside (what every provider needs).

``probe(base_url)`` checks once. Ready means:

1. ``GET /health`` answers 200 (docs/protocol.md §5.1);
2. ``GET /capabilities`` does not refuse the token (401/403 can never get better: ``ProbeFailed``);
   when it answers, its ``transports`` list says whether the server has ``/ws``;
3. one real protocol round-trip on ``/ws``, when the server has it (or does not say: an upstream
   server without ``/capabilities``) and the ``ws`` transport's client connector is installed
   here (the probe goes through it, like every client): connect,
   ``{"type":"state"}``, get a reply frame, ``{"type":"close"}``, and wait for the server to close
   the socket. Waiting for that close matters: the server frees the probe's session before it
   closes, so a ``max_sessions=1`` server is free again when the caller connects. A server that
   answers the upgrade with 404 has no ``/ws`` (an HTTP-only image): ``/health`` and
   ``/capabilities`` are then all there is to check. A refused upgrade is a refused token
   (``ProbeFailed``) for 401, and for 403 where ``/capabilities`` did not answer (Starlette also
   answers 403 for a path without a WebSocket route); any other refusal is ``NotReady``.

**Without the ws client** (only the kernel's own dependencies installed) the check is ``/health`` +
``GET /capabilities``, and ``probe`` says so by returning ``"http"``; ``mode="ws"`` then fails
with ``ProbeFailed`` naming the missing package. The connector (and so ``websockets``) is loaded
only when a round-trip runs, never at module import.

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

import asyncio
import http.client
import json
import threading
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar
from urllib.parse import urlsplit

from openenv.client_connect import ConnectRefused
from openenv.errors import ProtocolError, SessionLostError, StepTimeoutError
from openenv.interfaces import ClientConnector, ConnectOptions
from openenv.protocol import T_ERROR, T_STATE, frame

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
_NO_WS = ("probe mode 'ws' needs the websockets library and the WebSocket client transport here: "
          "`pip install openenvkit-transport-ws`, or use probe mode 'auto' or 'http'")
_T = TypeVar("_T")


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
    """Whether the WebSocket round-trip can run here: the ``websockets`` library imports and the
    ``ws`` transport with its client connector is installed (both are optional for the kernel)."""
    try:
        import websockets  # noqa: F401
    except ImportError:
        return False
    return _ws_connector() is not None


def _ws_connector() -> ClientConnector | None:
    """The installed ``ws`` client connector, or ``None`` when there is none (or it cannot load)."""
    from openenv.client_connect import resolve_connector

    try:
        return resolve_connector("ws://127.0.0.1", "ws")
    except Exception:  # not installed (UnknownNameError), no client, or its imports fail
        return None


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
            raise ProbeFailed(_NO_WS)
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
    connector = _ws_connector()
    if connector is None:
        raise ProbeFailed(_NO_WS)
    try:
        reply = _run(_state_round_trip(connector, base_url, headers, timeout_s))
    except ConnectRefused as exc:
        status = exc.status
        # 403 is also how Starlette refuses an upgrade to a path it has no WebSocket route for, so
        # it means a refused token only where /capabilities (behind the same auth) did not answer.
        if status == 401 or (status == 403 and transports is None):
            raise ProbeFailed(f"the server refused the token on /ws (HTTP {status})") from None
        if status == 404 and not required:
            return "http"  # no /ws on this server: /health and /capabilities are all there is
        listed = "" if transports is None or "ws" in transports else \
            f" (the server lists no 'ws' transport: {', '.join(transports) or 'none'})"
        raise NotReady(f"/ws upgrade answered HTTP {status}{listed}") from None
    except ProtocolError as exc:  # the reply was not JSON, or not an object
        raise ProbeFailed(f"the reply to a 'state' frame on /ws is not JSON: {exc.message}") from None
    except SessionLostError as exc:
        raise NotReady(f"/ws closed during the round-trip: {exc.message}") from None
    except (OSError, TimeoutError, StepTimeoutError) as exc:  # ConnectionError is an OSError
        raise NotReady(f"/ws round-trip failed: {type(exc).__name__}: {exc}") from None
    _check_reply(reply)
    return "ws"


async def _state_round_trip(connector: ClientConnector, base_url: str, headers: dict[str, str],
                            timeout_s: float) -> dict[str, Any]:
    """Connect, send a ``state`` frame, read the reply, close (the connector waits, bounded, for
    the server to end the session, so its slot is free when this returns)."""
    options = ConnectOptions(headers=dict(headers), connect_timeout_s=timeout_s, message_timeout_s=timeout_s,
                             ping_interval_s=None, ping_timeout_s=None)
    conn = await connector.connect(base_url, options)
    try:
        reply = await conn.request(frame(T_STATE))
    except BaseException:
        await conn.abort()
        raise
    try:
        async with asyncio.timeout(timeout_s):  # the probe's own bound, not the connector's
            await conn.close()
    except TimeoutError:
        await conn.abort()
    return reply


def _run(coro: Coroutine[Any, Any, _T]) -> _T:
    """Run ``coro`` to completion from synchronous code, also when this thread runs a loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    result: list[_T] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            result.append(asyncio.run(coro))
        except BaseException as exc:
            error.append(exc)

    thread = threading.Thread(target=target, name="openenv-readiness-probe", daemon=True)
    thread.start()
    thread.join()
    if error:
        raise error[0]
    return result[0]


def _check_reply(reply: dict[str, Any]) -> None:
    """Judge the reply to the probe's ``state`` frame (see the module docstring's policy)."""
    kind = reply.get("type")
    if kind == T_STATE:
        return
    if kind != T_ERROR:
        raise ProbeFailed(f"unexpected reply to a 'state' frame on /ws: {reply!r}")
    raw = reply.get("data")
    data: dict[str, Any] = raw if isinstance(raw, dict) else {}
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
