"""The kernel's ASGI guard: limits applied to every request before and while any route reads it.

* **Headers.** More than ``max_header_count`` headers, or more than ``max_header_bytes`` of names
  and values together, are answered ``431`` (an HTTP request) or refused during the WebSocket
  handshake (``431`` where the server supports handshake replies, else close ``1009``) before any
  route runs.
* **Bodies.** Every HTTP request body, on every route and transport, chunked or not, is counted
  while it is read: past ``max_message_bytes`` the guard answers ``413`` itself and tells the
  route the client is gone, so nothing more is read. (A declared ``Content-Length`` over the limit
  is answered by the route, in its transport's format, before it reads.)
* **Body budget.** The bytes of all bodies being read at once are bounded by a ``BodyBudget``;
  a request that would exceed it gets ``503`` with ``Retry-After`` instead of more memory.

* **One credential.** A request with more than one ``Authorization`` / ``X-OpenEnv-Token`` header
  is answered ``400``: authentication and the session owner always read the same single token.

Each refusal is logged (``openenv.server``) once per request at warning level.
"""

from __future__ import annotations

import logging
from typing import Any

from openenv.limits import BodyBudget

__all__ = ["DEFAULT_MAX_HEADER_BYTES", "DEFAULT_MAX_HEADER_COUNT", "RequestGuard"]

log = logging.getLogger("openenv.server")

#: Most headers one request may carry.
DEFAULT_MAX_HEADER_COUNT = 100
#: Most bytes of header names and values one request may carry.
DEFAULT_MAX_HEADER_BYTES = 64 * 1024

_JSON = [(b"content-type", b"application/json")]


class RequestGuard:
    """Wraps the app's ``(scope, receive, send)`` with the header, body and budget limits."""

    def __init__(self, *, max_body_bytes: int, budget: BodyBudget,
                 max_header_count: int = DEFAULT_MAX_HEADER_COUNT,
                 max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES) -> None:
        self.max_body_bytes = max_body_bytes
        self.budget = budget
        self.max_header_count = max_header_count
        self.max_header_bytes = max_header_bytes

    def header_problem(self, headers: Any) -> str | None:
        """Why ``headers`` (ASGI raw pairs) are refused, or None."""
        if len(headers) > self.max_header_count:
            return (f"Request has {len(headers)} headers; this server accepts at most "
                    f"{self.max_header_count}.")
        size = 0
        for name, value in headers:
            size += len(name) + len(value)
        if size > self.max_header_bytes:
            return (f"Request headers total {size} bytes; this server accepts at most "
                    f"{self.max_header_bytes}.")
        return None

    async def refuse_headers(self, scope: Any, receive: Any, send: Any, problem: str, status: int = 431) -> None:
        log.warning("refused %s %s: %s", scope["type"], scope.get("path"), problem)
        code = b"HEADERS_TOO_LARGE" if status == 431 else b"AMBIGUOUS_CREDENTIALS"
        body = b'{"detail":"%s","code":"%s"}' % (problem.encode(), code)
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": status, "headers": _JSON})
            await send({"type": "http.response.body", "body": body})
            return
        await receive()  # websocket.connect
        if "websocket.http.response" in scope.get("extensions", {}):
            await send({"type": "websocket.http.response.start", "status": status, "headers": _JSON})
            await send({"type": "websocket.http.response.body", "body": body})
        else:
            await send({"type": "websocket.close", "code": 1009 if status == 431 else 1008})

    async def __call__(self, app: Any, scope: Any, receive: Any, send: Any) -> None:
        headers = scope.get("headers", ())
        problem = self.header_problem(headers)
        if problem is not None:
            return await self.refuse_headers(scope, receive, send, problem)
        credentials = 0
        for name, _ in headers:
            if name == b"authorization" or name == b"x-openenv-token":
                credentials += 1
        if credentials > 1:
            return await self.refuse_headers(
                scope, receive, send, "Request carries several credentials (Authorization / X-OpenEnv-Token "
                "headers); send exactly one.", status=400)
        if scope["type"] != "http":
            return await app(scope, receive, send)
        # A declared Content-Length over the limit is left to the route (each transport answers it
        # in its own format before reading); the count below bounds what is read either way.
        body = _GuardedBody(self, scope, receive, send)
        try:
            await app(scope, body.receive, body.send)
        finally:
            body.release()


class _GuardedBody:
    """One request's ``receive``/``send`` under the guard's body limit and budget."""

    __slots__ = ("_receive", "_send", "guard", "held", "refused", "scope", "started")

    def __init__(self, guard: RequestGuard, scope: Any, receive: Any, send: Any) -> None:
        self.guard, self.scope, self._receive, self._send = guard, scope, receive, send
        self.held = 0
        self.refused = False
        self.started = False

    async def receive(self) -> Any:
        if self.refused:
            return {"type": "http.disconnect"}
        message = await self._receive()
        if message["type"] == "http.request":
            n = len(message.get("body", b""))
            if n:
                if self.held + n > self.guard.max_body_bytes:
                    await self.refuse(413, "too_large", self.held + n)
                    return {"type": "http.disconnect"}
                if not self.guard.budget.take(n):
                    await self.refuse(503, "budget", self.held + n)
                    return {"type": "http.disconnect"}
                self.held += n
        return message

    async def send(self, message: Any) -> None:
        if self.refused:
            return  # the guard already answered; the route's late reply is dropped
        if message["type"] == "http.response.start":
            self.started = True
        await self._send(message)

    async def refuse(self, status: int, why: str, size: int) -> None:
        self.refused = True
        self.release()
        limit = self.guard.max_body_bytes
        if why == "too_large":
            detail = (f"Request body of {size} bytes exceeds the server limit of {limit} bytes "
                      "(max_message_bytes). Send a smaller body or raise the limit.")
            headers = _JSON
        else:
            detail = (f"The server is reading {self.guard.budget.used} bytes of request bodies, its "
                      f"limit ({self.guard.budget.limit}); retry shortly.")
            headers = [*_JSON, (b"retry-after", b"1")]
        log.warning("refused %s %s (%d): %s", self.scope.get("method"), self.scope.get("path"), status, detail)
        if self.started:
            return  # a reply is under way: cutting the body short is all that can be done
        body = (b'{"detail":"%s","code":"VALIDATION_ERROR"}' % detail.encode() if status == 413
                else b'{"detail":"%s","code":"CAPACITY_REACHED"}' % detail.encode())
        await self._send({"type": "http.response.start", "status": status, "headers": headers})
        await self._send({"type": "http.response.body", "body": body})

    def release(self) -> None:
        if self.held:
            self.guard.budget.give(self.held)
            self.held = 0
