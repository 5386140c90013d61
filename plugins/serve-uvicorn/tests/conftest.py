"""Fixtures of openenvkit-serve-uvicorn's tests: a guarded HTTP protocol on an in-memory transport."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
import uvicorn
from serve_uvicorn_support import MemoryTransport
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.server import ServerState

from openenv_serve_uvicorn.connections import guarded_protocol


async def _ok_app(scope: Any, receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


@pytest.fixture
def http_protocol() -> Callable[..., tuple[Any, MemoryTransport]]:
    """``make(max_header_bytes=65536)``: a connected guarded httptools protocol and its transport
    (call from a running loop)."""
    def make(max_header_bytes: int = 65536) -> tuple[Any, MemoryTransport]:
        config = uvicorn.Config(_ok_app, log_level="warning", lifespan="off")
        config.load()
        cls = guarded_protocol(HttpToolsProtocol, header_timeout_s=None, max_connections=None,
                               max_header_bytes=max_header_bytes)
        proto = cls(config=config, server_state=ServerState(), app_state={}, _loop=asyncio.get_running_loop())
        transport = MemoryTransport()
        transport.set_protocol(proto)
        proto.connection_made(transport)
        return proto, transport

    return make
