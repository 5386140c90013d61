"""Client side of the HTTP transport: WebSocket-style frames carried over HTTP requests.

``HttpConnector.connect()`` creates a server session (``POST /sessions``), or uses
``options.session_id``, and returns an ``HttpConnection`` that maps the frames of ``/ws``
(docs/protocol.md §3.3) onto the session-bound HTTP routes:

=============================  =============================================  ======================
frame                          request                                        reply frame
=============================  =============================================  ======================
``reset`` ``data``             ``POST /reset`` body ``data``                  ``observation``
``step`` ``data`` (+kwargs)    ``POST /step`` ``{"action": data, **kwargs}``  ``observation``
``state``                      ``GET /state``                                 ``state``
``mcp`` ``data``               ``POST /mcp`` with ``params.session_id``       ``mcp``
``close``                      ``DELETE /sessions/{id}``                      none
``snapshot``                   ``POST /sessions/{id}/snapshot``               ``snapshot``
``restore`` ``data``           ``POST /sessions/{id}/restore`` body ``data``  ``observation``
``hello``                      none: answered here (grants ``snapshot``)      ``hello``
=============================  =============================================  ======================

Every request carries the ``OpenEnv-Session-Id`` header. Failures become ``error`` frames
``{"message", "code", ...}`` exactly like the WebSocket transport's, so the client above does not
care which transport it uses: 422 → ``VALIDATION_ERROR`` with ``errors``, 503 → ``CAPACITY_REACHED``
with the counts, 404 on the session → ``SESSION_ERROR``, 500 → ``EXECUTION_ERROR`` (or the code the
server sent). A network failure raises ``SessionLostError``; a reply that does not come within
``message_timeout_s`` raises ``StepTimeoutError``; both end the connection, because whether the
server applied the request is then unknown (cancelling a request ends it too). A body larger than
``max_message_bytes`` raises ``ValueError`` before anything is sent, leaving the connection usable.
Loopback servers are reached without any proxy; ``options.headers`` go on every request.

One connection = one ``httpx.AsyncClient`` = one keep-alive TCP connection, reused by every
request of the session and closed by ``close()``/``abort()`` (never a connection per request).
For ``http://`` servers that no proxy applies to, the client's transport is
``keepalive.KeepAliveTransport`` (one write per request, no httpcore/anyio in the step path);
``https://`` and proxied URLs use httpx's own transport.
A connection refused with 401 (token), 403 or 404 (no HTTP session routes) raises
``openenv.client_connect.ConnectRefused`` whose message names the fix.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from typing import Any
from urllib.parse import urlsplit

import httpx

from openenv.client_connect import refused
from openenv.errors import SessionLostError, StepTimeoutError, error_from_wire
from openenv.interfaces import ClientConnector, Connection, ConnectOptions
from openenv.protocol import (
    EXT_SNAPSHOT,
    T_CLOSE,
    T_ERROR,
    T_HELLO,
    T_MCP,
    T_OBSERVATION,
    T_RESET,
    T_RESTORE,
    T_SNAPSHOT,
    T_STATE,
    T_STEP,
)
from openenv.urls import is_loopback
from openenv.wire import JSONDecodeError, dumps_bytes, loads
from openenv_transport_rest.keepalive import KeepAlivePool, KeepAliveTransport
from openenv_transport_rest.models import SESSION_HEADER

__all__ = ["HttpConnection", "HttpConnector"]

log = logging.getLogger("openenv.transport.rest.client")

#: The protocol extensions this connection maps onto HTTP routes (its answer to ``hello``).
_HTTP_EXTENSIONS = (EXT_SNAPSHOT,)

#: Bounds of ``abort()``'s best-effort ``DELETE``: it must reach the server, but a caller that gave up
#: must not wait for the reply (the server closes the session once its in-flight request ends).
_ABORT_TIMEOUT = httpx.Timeout(2.0, read=0.5)
_NO_BODY: Any = object()


def _detail_text(body: Any, fallback: str) -> str:
    if isinstance(body, dict):
        detail = body.get("detail")
        if isinstance(detail, str):
            return detail
        if detail is not None:
            return str(detail)
    return fallback


def _error_data(response: httpx.Response) -> dict[str, Any]:
    """The ``data`` of an error frame for a non-2xx reply (see the module docstring)."""
    try:
        body: Any = response.json()
    except ValueError:
        body = None
    status = response.status_code
    text = response.text.strip()[:500] or response.reason_phrase
    extra: dict[str, Any] = {}
    if isinstance(body, dict):
        extra = {k: v for k, v in body.items() if k not in ("detail", "code", "message")}
    own_code = isinstance(body, dict) and isinstance(body.get("code"), str) and body["code"] != "VALIDATION_ERROR"
    if status == 422 and not own_code:  # FastAPI's shape (a SNAPSHOT_ERROR 422 keeps its own code)
        errors = body.get("detail") if isinstance(body, dict) else None
        if isinstance(errors, list):
            errors = [_strip_body_loc(e) for e in errors]
            return {"message": "Invalid message", "code": "VALIDATION_ERROR", "errors": errors, "status": 422}
        return {"message": _detail_text(body, text), "code": "VALIDATION_ERROR", "errors": [], "status": 422}
    message = _detail_text(body, text)
    code = body.get("code") if isinstance(body, dict) and isinstance(body.get("code"), str) else None
    if code is None:
        if status == 503:
            code = "CAPACITY_REACHED"
        elif (status == 404 and message.startswith("Unknown session_id")) or status == 409:
            code = "SESSION_ERROR"
        elif status >= 500:
            code = "EXECUTION_ERROR"
        else:
            code = "PROTOCOL_ERROR"
            message = (f"{response.request.method} {response.request.url.path} answered "
                       f"{status} {response.reason_phrase}: {message}")
            if status == 404:
                message += (" (the server may run in production mode, where HTTP reset/step/state "
                            "are disabled, or may not offer HTTP sessions: use the WebSocket transport)")
    return {"message": message, "code": code, **extra, "status": status}


def _strip_body_loc(err: Any) -> Any:
    # Body errors carry loc ["body", ...]; the WebSocket transport reports the same fields without
    # the prefix (["seed"]), so callers see one shape whatever the transport.
    if isinstance(err, dict):
        loc = err.get("loc")
        if isinstance(loc, list) and loc[:1] == ["body"]:
            return {**err, "loc": loc[1:]}
    return err


class HttpConnection(Connection):
    """One server session driven over HTTP. Replies are queued in request order."""

    def __init__(self, client: httpx.AsyncClient, base_url: str, session_id: str, *, owned: bool,
                 options: ConnectOptions, pool: KeepAlivePool | None = None) -> None:
        self._client = client
        #: Session requests go straight through the pool (when the client's transport has one),
        #: with the head built here once: the step path skips httpx's client layer.
        self._pool = pool
        parts = urlsplit(base_url)
        self._prefix = parts.path.rstrip("/").encode("ascii")
        fixed = [b"Host: " + parts.netloc.encode("ascii") + b"\r\n"]
        fixed += [name + b": " + value + b"\r\n" for name, value in client.headers.raw if name.lower() != b"host"]
        fixed.append(SESSION_HEADER.encode("ascii") + b": " + session_id.encode("ascii") + b"\r\n")
        self._fixed_head = b"".join(fixed)
        self._wire_timeouts: dict[str, float | None] = {
            "connect": options.connect_timeout_s, "read": options.message_timeout_s,
            "write": options.message_timeout_s}
        self._base_url = base_url
        self.session_id = session_id
        #: Whether this connection created the session (and so deletes it on close).
        self.owned = owned
        self._limit = options.max_message_bytes
        self._timeout_s = options.message_timeout_s
        self._headers = {SESSION_HEADER: session_id}
        self._json_headers = {SESSION_HEADER: session_id, "content-type": "application/json"}
        self._replies: deque[dict[str, Any]] = deque()
        self._closed = False
        self._deleted = False
        self._abort_task: asyncio.Task[None] | None = None

    @property
    def closed(self) -> bool:
        return self._closed

    async def send(self, frame: dict[str, Any]) -> None:
        """Perform the request for ``frame`` now; its reply is returned by the next ``receive()``.

        Raises ``ValueError`` (connection intact) when the body would exceed ``max_message_bytes``.
        """
        if self._closed:
            raise SessionLostError(f"The HTTP connection to {self._base_url} is closed; call reset() to "
                                   "start a new session.")
        if not isinstance(frame, dict):
            raise TypeError(f"A frame is a dict, got {type(frame).__name__}")
        kind = frame.get("type", "")
        if kind == T_CLOSE:
            await self.close()
            return
        reply = await self._perform(kind, frame)
        self._replies.append(reply)

    async def receive(self) -> dict[str, Any]:
        if self._replies:
            return self._replies.popleft()
        if self._closed:
            raise SessionLostError(f"The HTTP connection to {self._base_url} is closed.")
        raise RuntimeError("receive() called with no request outstanding: send a frame first.")

    async def close(self) -> None:
        """Delete the session if this connection created it, then close the HTTP client. Idempotent."""
        self._closed = True
        await self._finish_abort()
        await self._delete(timeout=None)
        await self._client.aclose()

    async def abort(self) -> None:
        """Give up on the connection; a short best-effort ``DELETE`` frees the server slot."""
        self._closed = True
        await self._finish_abort()
        await self._delete(timeout=_ABORT_TIMEOUT)
        await self._client.aclose()

    # -- internals --------------------------------------------------------------------------------

    async def _perform(self, kind: str, frame: dict[str, Any]) -> dict[str, Any]:
        data = frame.get("data")
        if kind == T_RESET:
            response = await self._request("POST", "/reset", data if data is not None else {})
            return self._reply(T_OBSERVATION, response)
        if kind == T_STEP:
            body = {"action": data}
            kwargs = frame.get("kwargs")
            if isinstance(kwargs, dict):  # step keyword arguments travel as top-level body keys
                body = {**kwargs, "action": data}
            return self._reply(T_OBSERVATION, await self._request("POST", "/step", body))
        if kind == T_STATE:
            return self._reply(T_STATE, await self._request("GET", "/state"))
        if kind == T_MCP:
            return await self._mcp(data)
        if kind == T_HELLO:  # answered here: what this connection maps onto routes (docs/protocol.md §12)
            want = (data or {}).get("want", []) if isinstance(data, dict) else []
            granted = [ext for ext in _HTTP_EXTENSIONS if ext in want]
            return {"type": T_HELLO, "data": {"session_id": self.session_id, "extensions": granted,
                                               "max_message_bytes": self._limit}}
        if kind == T_SNAPSHOT:
            return self._reply(T_SNAPSHOT, await self._request("POST", f"/sessions/{self.session_id}/snapshot"))
        if kind == T_RESTORE:
            return self._reply(T_OBSERVATION, await self._request("POST", f"/sessions/{self.session_id}/restore",
                                                                  data))
        return {"type": T_ERROR, "data": {"message": f"Unknown message type: {kind}", "code": "UNKNOWN_TYPE"}}

    async def _mcp(self, request: Any) -> dict[str, Any]:
        if not isinstance(request, dict):
            return {"type": T_ERROR, "data": {"message": "Invalid message", "code": "VALIDATION_ERROR",
                                              "errors": [{"type": "model_type", "loc": ["data"],
                                                          "msg": "Input should be a JSON object",
                                                          "input": request}]}}
        if request.get("method") == "openenv/session/create":
            # As on a WebSocket (docs/protocol.md §4.4): a connection's own session is the answer; creating a
            # second one would leak it.
            return {"type": T_MCP, "data": {"jsonrpc": "2.0", "id": request.get("id"),
                                            "result": {"session_id": self.session_id}}}
        params = request.get("params")
        if params is None or isinstance(params, dict):
            request = {**request, "params": {"session_id": self.session_id, **(params or {})}}
        return self._reply(T_MCP, await self._request("POST", "/mcp", request))

    def _reply(self, kind: str, response: httpx.Response) -> dict[str, Any]:
        if response.is_success:
            try:
                return {"type": kind, "data": loads(response.content)}
            except JSONDecodeError:
                return {"type": T_ERROR, "data": {"message": f"Invalid JSON in the reply: {response.text[:200]!r}",
                                                  "code": "INVALID_JSON", "status": response.status_code}}
        return {"type": T_ERROR, "data": _error_data(response)}

    async def _request(self, method: str, path: str, body: Any = _NO_BODY) -> httpx.Response:
        headers, content = self._headers, None
        if body is not _NO_BODY:
            content = dumps_bytes(body)
            if len(content) > self._limit:
                raise ValueError(
                    f"Request body of {len(content)} bytes exceeds the limit of {self._limit} bytes "
                    "(max_message_bytes); send less data per request, or raise max_message_bytes on "
                    "both ends."
                )
            headers = self._json_headers
        try:
            if self._pool is not None:
                return await self._direct(method, path, content)
            return await self._client.request(method, path, headers=headers, content=content)
        except asyncio.CancelledError:
            # The request may still run on the server: this session's state is unknown from now on.
            self._abort_soon()
            raise
        except httpx.TimeoutException as exc:
            await self.abort()
            raise StepTimeoutError(
                f"No reply to {method} {path} within {self._timeout_s} s ({type(exc).__name__}); the "
                "connection was dropped because the request's outcome is unknown. Call reset() to "
                "start a new session, or raise message_timeout_s.",
                data={"timeout_s": self._timeout_s},
            ) from exc
        except httpx.HTTPError as exc:
            await self.abort()
            raise SessionLostError(
                f"HTTP request {method} {path} to {self._base_url} failed: {type(exc).__name__}: {exc}. "
                "The session is lost; call reset() to start a new one."
            ) from exc

    async def _direct(self, method: str, path: str, content: bytes | None) -> httpx.Response:
        """``method path`` on the pool with the prebuilt head (same bytes httpx would send)."""
        assert self._pool is not None
        line = method.encode("ascii") + b" " + self._prefix + path.encode("ascii") + b" HTTP/1.1\r\n"
        if content is None:
            payload = line + self._fixed_head + b"\r\n"
        else:
            payload = b"".join((line, self._fixed_head, b"content-type: application/json\r\ncontent-length: ",
                                str(len(content)).encode("ascii"), b"\r\n\r\n", content))
        reply = await self._pool.exchange(method, payload, self._wire_timeouts)
        # Error replies carry their request (their messages name it); successes need none.
        request = None if 200 <= reply.status < 300 else httpx.Request(method, self._base_url + path)
        return reply.response(request)

    def _abort_soon(self) -> None:
        self._closed = True
        if self._abort_task is None:
            self._abort_task = asyncio.get_running_loop().create_task(self.abort())

    async def _finish_abort(self) -> None:
        task = self._abort_task
        if task is not None and task is not asyncio.current_task():
            with contextlib.suppress(Exception):
                await task

    async def _delete(self, timeout: httpx.Timeout | None) -> None:
        if self._deleted or not self.owned:
            return
        self._deleted = True
        kw: dict[str, Any] = {} if timeout is None else {"timeout": timeout}
        try:
            response = await self._client.delete(f"/sessions/{self.session_id}", headers=self._headers, **kw)
            if response.status_code not in (200, 404):
                log.warning("closing session %s answered %s: %s", self.session_id, response.status_code,
                            response.text[:200])
        except httpx.HTTPError as exc:
            # The server's idle timeout frees the slot eventually; nothing else can be done here.
            log.info("could not close session %s at %s: %s", self.session_id, self._base_url, exc)


class HttpConnector(ClientConnector):
    """Opens ``HttpConnection``s to ``http(s)://host[:port][/prefix]`` servers."""

    schemes = ("http", "https")

    async def connect(self, base_url: str, options: ConnectOptions) -> HttpConnection:
        """Create (or, with ``options.session_id``, check) a server session and return its connection.

        Raises ``ValueError`` for a URL this connector cannot use, ``ConnectionError("Failed to
        connect to <url>: ...")`` when the server cannot be reached or offers no HTTP sessions, and
        the typed ``CapacityError`` / ``FactoryError`` / ``SessionError`` when the server refuses
        the session.
        """
        url = base_url.rstrip("/")
        parts = urlsplit(url)
        if parts.scheme not in self.schemes:
            raise ValueError(f"HttpConnector needs an http:// or https:// URL, got {base_url!r}.")
        if parts.query or parts.fragment:
            raise ValueError(f"The base URL must not have a query string or fragment: {base_url!r}. "
                             "Pass the server root (e.g. https://host/prefix).")
        timeout = httpx.Timeout(options.message_timeout_s, connect=options.connect_timeout_s)
        # Proxies from the environment never apply to loopback servers; decided per client so
        # the process-wide proxy settings stay untouched.
        direct = is_loopback(parts.hostname)
        lean = parts.scheme == "http" and (direct or not _proxied(url))
        # One keep-alive connection written in one piece per request (see keepalive.py).
        transport = KeepAliveTransport(parts.hostname or "127.0.0.1", parts.port or 80) if lean else None
        client = httpx.AsyncClient(
            base_url=url, headers=dict(options.headers), timeout=timeout, trust_env=not direct,
            transport=transport,
        )
        try:
            if options.session_id is not None:
                session_id, owned = options.session_id, False
                response = await client.get(f"/sessions/{session_id}")
                if response.status_code != 200:
                    self._refuse(url, response)
            else:
                response = await client.post("/sessions")
                if response.status_code != 201:
                    self._refuse(url, response)
                session_id, owned = str(response.json()["session_id"]), True
        except BaseException as exc:
            await client.aclose()
            if isinstance(exc, httpx.HTTPError | KeyError | ValueError | TypeError):
                raise ConnectionError(f"Failed to connect to {url}: {type(exc).__name__}: {exc}") from exc
            raise
        return HttpConnection(client, url, session_id, owned=owned, options=options,
                              pool=transport.pool if transport is not None else None)

    @staticmethod
    def _refuse(url: str, response: httpx.Response) -> None:
        data = _error_data(response)
        if data["code"] in ("CAPACITY_REACHED", "FACTORY_ERROR", "SESSION_ERROR"):
            raise error_from_wire(data)
        status = response.status_code
        if status in (401, 403, 404):  # a refused token, or no HTTP session routes: name the fix
            detail = _detail_text(_json_or_none(response), "")
            raise refused(url, status, transport="rest", detail=detail)
        raise ConnectionError(f"Failed to connect to {url}: {data['message']}")


def _proxied(url: str) -> bool:
    """Whether the environment's proxy settings apply to ``url`` (then httpx's transport is used)."""
    import urllib.request

    proxies = urllib.request.getproxies()
    if not proxies.get("http") and not proxies.get("all"):
        return False
    return not urllib.request.proxy_bypass(urlsplit(url).hostname or "")


def _json_or_none(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None
