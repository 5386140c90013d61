"""The model-call routes' plumbing as plain ASGI: reading a bounded body, sending a JSON answer, relaying
a stream. No framework objects are built per call (a Starlette ``Request``/``Response``, its routing and
middleware cost more CPU per call than the gateway's own work); the other routes stay on Starlette.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.types import Receive, Scope, Send

from openenv_gateway.errors import Dialect, GatewayError, error_body

__all__ = ["ClientGone", "call_headers", "dumps", "read_body", "send_error", "send_json", "send_stream"]

_JSON = [(b"content-type", b"application/json")]
_EVENT_STREAM = [(b"content-type", b"text/event-stream; charset=utf-8")]


class ClientGone(Exception):
    """The agent closed the connection before its request's body arrived (there is no one to answer)."""


def dumps(payload: Any) -> bytes:
    """Compact UTF-8 JSON, as Starlette's ``JSONResponse`` writes it (``orjson``; the standard library for
    what orjson refuses, e.g. integers over 64 bits)."""
    try:
        return orjson.dumps(payload)
    except TypeError:
        return json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def call_headers(scope: Scope) -> tuple[str, str | None]:
    """The episode key (``x-api-key``, else ``Authorization: Bearer``) and the declared content length."""
    key = auth = ""
    length: str | None = None
    for name, value in scope["headers"]:  # the first of a repeated header, as Starlette's headers.get
        if name == b"x-api-key":
            key = key or value.decode("latin-1")
        elif name == b"authorization":
            auth = auth or value.decode("latin-1")
        elif name == b"content-length" and length is None:
            length = value.decode("latin-1")
    if not key and auth[:7].lower() == "bearer ":
        key = auth[7:].strip()
    return key, length


async def read_body(receive: Receive, declared: str | None, limit: int) -> bytes:
    """The request body, refused with a 413 ``GatewayError`` past ``limit`` bytes (declared or sent)."""
    if declared and declared.isdigit() and int(declared) > limit:
        raise _too_big(limit)
    message = await receive()
    if message["type"] == "http.disconnect":
        raise ClientGone
    body: bytes = message.get("body", b"")
    if not message.get("more_body", False):  # the usual case: one message, no copy
        if len(body) > limit:
            raise _too_big(limit)
        return body
    data = bytearray(body)
    while True:
        if len(data) > limit:
            raise _too_big(limit)
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        data += message.get("body", b"")
        if not message.get("more_body", False):
            break
    if len(data) > limit:
        raise _too_big(limit)
    return bytes(data)


def _too_big(limit: int) -> GatewayError:
    return GatewayError(413, "request_too_large", f"the request body is over the gateway's limit of {limit} "
                        "bytes: send smaller images or fewer messages")


async def send_json(send: Send, body: bytes, status: int = 200) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-length", str(len(body)).encode()), *_JSON]})
    await send({"type": "http.response.body", "body": body})


async def send_error(send: Send, dialect: Dialect, exc: GatewayError) -> None:
    await send_json(send, dumps(error_body(dialect, exc.status, exc.code, exc.message, exc.param)), exc.status)


async def send_stream(send: Send, receive: Receive, events: AsyncIterator[bytes]) -> None:
    """Relay ``events`` as a ``text/event-stream``. An agent that hangs up mid-stream cancels the relay
    (``events`` sees the ``CancelledError`` where it waits, as under Starlette's ``StreamingResponse``),
    and the call ends quietly: one small task per stream listens for the disconnect."""
    task = asyncio.current_task()
    assert task is not None
    state = {"finished": False, "gone": False}

    async def watch() -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                if not state["finished"]:
                    state["gone"] = True
                    task.cancel()
                return

    watcher = asyncio.ensure_future(watch())
    try:
        await send({"type": "http.response.start", "status": 200, "headers": _EVENT_STREAM})
        async for event in events:
            await send({"type": "http.response.body", "body": event, "more_body": True})
        state["finished"] = True
        watcher.cancel()
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    except asyncio.CancelledError:
        if not state["gone"]:
            raise
        task.uncancel()  # the agent left: nothing to answer, and not an error of the server's
    finally:
        state["finished"] = True
        watcher.cancel()
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            await aclose()
