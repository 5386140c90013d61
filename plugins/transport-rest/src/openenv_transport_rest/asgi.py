"""Raw-ASGI plumbing of the HTTP transport: replies, bounded body reads, header look-ups.

Every route of the transport is a raw ASGI endpoint (``Endpoint``) mounted through a Starlette
``Route``, which keeps doing what it did before: path matching, path parameters and the 405 for a
wrong method (answered by the kernel's JSON handler). What Starlette's request/response objects
did per request is done here by hand, byte for byte the same:

* A reply is ``(status, headers, body)``; ``json_reply`` lays the headers out as Starlette's
  ``Response`` does (the given ones lowercased, then ``content-length``, then ``content-type``).
* ``read_body`` reads the body with the ``max_message_bytes`` bound applied to the declared
  ``Content-Length`` first and to the bytes received so far after every chunk (413 either way).
* ``first_header`` returns the first occurrence of a header, as ``Request.headers.get`` does.

Promises: a handler that raises ``Reply`` answers with it; any other exception is logged and
answered with a JSON 500 ``{"detail", "code": "EXECUTION_ERROR"}``; a client that disconnects
while its body is being read gets no reply (there is no one to read it), and that is logged at
DEBUG only (it is the client's doing, not a server fault).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from openenv import wire

__all__ = [
    "JSON",
    "ClientGone",
    "Endpoint",
    "Handler",
    "Headers",
    "Receive",
    "Reply",
    "ReplyTuple",
    "Scope",
    "ScopeHeaders",
    "Send",
    "first_header",
    "json_reply",
    "raw_reply",
    "read_body",
    "too_large",
]

log = logging.getLogger("openenv.transport.rest")

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
Headers = list[tuple[bytes, bytes]]
#: ``(status, raw headers, body)``: everything a reply consists of.
ReplyTuple = tuple[int, Headers, bytes]
Handler = Callable[[Scope, Receive], Awaitable[ReplyTuple]]

JSON = b"application/json"
_CONTENT_LENGTH = b"content-length"
_CONTENT_TYPE = b"content-type"


class Reply(Exception):
    """Raised by a handler to answer at once (keeps handlers linear)."""

    def __init__(self, status: int, headers: Headers, body: bytes) -> None:
        super().__init__(status)
        self.status = status
        self.headers = headers
        self.body = body

    def set_header(self, name: bytes, value: bytes) -> None:
        """Set ``name`` (lowercase) as Starlette's ``MutableHeaders.__setitem__`` does: the first
        occurrence is replaced and later ones dropped, or the header is appended."""
        found = [i for i, (key, _) in enumerate(self.headers) if key == name]
        if not found:
            self.headers.append((name, value))
            return
        for i in reversed(found[1:]):
            del self.headers[i]
        self.headers[found[0]] = (name, value)


class ClientGone(Exception):
    """The client disconnected before its request body was complete."""


def raw_reply(content: bytes, status: int = 200, headers: Headers | None = None,
              media_type: bytes = JSON) -> ReplyTuple:
    """A reply with Starlette ``Response``'s header layout (``headers`` must be lowercase)."""
    raw = [] if headers is None else list(headers)
    raw.append((_CONTENT_LENGTH, b"%d" % len(content)))
    raw.append((_CONTENT_TYPE, media_type))
    return status, raw, content


def json_reply(body: Any, status: int = 200, headers: Headers | None = None) -> ReplyTuple:
    """``body`` as compact JSON (``wire.dumps_bytes``), as the transport has always encoded it."""
    return raw_reply(wire.dumps_bytes(body), status, headers)


def too_large(size: int, limit: int) -> Reply:
    return Reply(*json_reply(
        {"detail": f"Request body of {size} bytes exceeds the server limit of {limit} bytes "
                   "(max_message_bytes). Send a smaller body or raise the limit.",
         "code": "VALIDATION_ERROR"}, 413))


def first_header(scope: Scope, name: bytes) -> bytes | None:
    """The first value of header ``name`` (lowercase, as ASGI servers deliver names), or None."""
    for key, value in scope["headers"]:
        if key == name:
            return value  # type: ignore[no-any-return]
    return None


class ScopeHeaders:
    """The ``.get`` of Starlette's ``Headers`` over an ASGI scope, without copying the list.

    Enough for ``ServerContext.principal`` (which only calls ``get``); built only when needed.
    """

    __slots__ = ("_scope",)

    def __init__(self, scope: Scope) -> None:
        self._scope = scope

    def get(self, key: str, default: str | None = None) -> str | None:
        value = first_header(self._scope, key.lower().encode("latin-1"))
        return default if value is None else value.decode("latin-1")


async def read_body(receive: Receive, declared: bytes | None, limit: int) -> bytes:
    """The whole request body, at most ``limit`` bytes, else ``Reply`` 413.

    ``declared`` is the ``Content-Length`` header: a declared size over the limit is refused
    before anything is read. Raises ``ClientGone`` if the client disconnects first.
    """
    # ASGI servers (httptools, h11) refuse a non-numeric Content-Length before the app runs;
    # anything odd that still gets here is ignored, and the read below is bounded regardless.
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large(int(declared), limit)
    message = await receive()
    if message["type"] == "http.request" and not message.get("more_body", False):
        body = message.get("body", b"")  # the usual case: the whole body in one message
        if len(body) > limit:
            raise too_large(len(body), limit)
        return body if type(body) is bytes else bytes(body)
    buf = bytearray()
    while True:
        mtype = message["type"]
        if mtype == "http.request":
            chunk = message.get("body", b"")
            if chunk:
                buf += chunk
                if len(buf) > limit:
                    raise too_large(len(buf), limit)
            if not message.get("more_body", False):
                return bytes(buf)
        elif mtype == "http.disconnect":
            raise ClientGone
        message = await receive()


class Endpoint:
    """A raw ASGI app answering with what ``handler(scope, receive)`` returns.

    An instance (not a function) so that Starlette's ``Route`` mounts it as an ASGI app rather
    than wrapping it in a request/response adapter.
    """

    __slots__ = ("handler",)

    def __init__(self, handler: Handler) -> None:
        self.handler = handler

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            status, headers, body = await self.handler(scope, receive)
        except Reply as reply:
            status, headers, body = reply.status, reply.headers, reply.body
        except ClientGone:
            log.debug("%s %s: client disconnected before the body was complete",
                      scope.get("method"), scope.get("path"))
            return
        except Exception as exc:
            log.exception("%s %s failed", scope.get("method"), scope.get("path"))
            status, headers, body = json_reply(
                {"detail": str(exc) or type(exc).__name__, "code": "EXECUTION_ERROR"}, 500)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
