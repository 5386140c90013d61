"""Every uvicorn attribute and method this package overrides or reads, by name.

The hardening subclasses uvicorn's protocol classes (private API), so a uvicorn release that
renames one of these breaks it silently. This test fails at once instead; run it before widening
the uvicorn pin in pyproject.toml.
"""

from __future__ import annotations

import asyncio
import inspect
from typing import Any

import pytest
import uvicorn
from serve_uvicorn_support import MemoryTransport
from uvicorn.protocols.http.auto import AutoHTTPProtocol
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
from uvicorn.protocols.websockets.auto import AutoWebSocketsProtocol
from uvicorn.protocols.websockets.websockets_sansio_impl import WebSocketsSansIOProtocol
from uvicorn.server import ServerState

from openenv.context import ServerConfig
from openenv.serving import uvicorn_options

#: Methods the guarded HTTP protocol overrides (connections.py), on both uvicorn HTTP protocols.
HTTP_OVERRIDES = ["connection_made", "connection_lost", "on_response_complete"]
#: Overridden on the httptools protocol only: the parser callbacks the header counter needs.
HTTPTOOLS_OVERRIDES = ["data_received", "on_message_begin", "on_headers_complete", "on_body"]
#: Instance attributes connections.py reads (after ``connection_made``).
HTTP_READS = ["connections", "loop", "transport", "cycle"]
#: Methods the guarded WebSocket protocol overrides (wsguard.py).
WS_OVERRIDES = ["connection_made", "handle_connect", "data_received", "receive", "send", "connection_lost"]
#: Instance attributes wsguard.py reads or writes (``scope`` is set by ``handle_connect``).
WS_READS = ["queue", "read_paused", "writable", "transport", "loop"]
#: The Server surface server.py and openenv.serving use.
SERVER_METHODS = ["serve"]
SERVER_READS = ["started", "should_exit", "_captured_signals", "config"]


def _config() -> uvicorn.Config:
    async def app(scope: Any, receive: Any, send: Any) -> None:
        pass

    config = uvicorn.Config(app, log_level="warning", lifespan="off")
    config.load()
    return config


@pytest.mark.parametrize("cls", [HttpToolsProtocol, H11Protocol], ids=lambda c: c.__name__)
@pytest.mark.parametrize("name", HTTP_OVERRIDES)
def test_http_methods_we_override_exist(cls: type, name: str) -> None:
    assert callable(getattr(cls, name, None)), f"uvicorn's {cls.__name__}.{name} is gone"


@pytest.mark.parametrize("name", HTTPTOOLS_OVERRIDES)
def test_httptools_callbacks_we_override_exist(name: str) -> None:
    assert callable(getattr(HttpToolsProtocol, name, None)), f"uvicorn's HttpToolsProtocol.{name} is gone"


def test_auto_http_is_httptools() -> None:
    # The header counter runs only on httptools (a dependency of this package).
    assert AutoHTTPProtocol is HttpToolsProtocol


@pytest.mark.parametrize("name", HTTP_READS)
async def test_http_attributes_we_read_exist(name: str) -> None:
    proto = HttpToolsProtocol(config=_config(), server_state=ServerState(), app_state={},
                              _loop=asyncio.get_running_loop())
    proto.connection_made(MemoryTransport())
    assert hasattr(proto, name), f"uvicorn's HttpToolsProtocol no longer sets .{name}"


@pytest.mark.parametrize("name", WS_OVERRIDES)
def test_websocket_methods_we_override_exist(name: str) -> None:
    assert callable(getattr(WebSocketsSansIOProtocol, name, None)), (
        f"uvicorn's WebSocketsSansIOProtocol.{name} is gone")


def test_receive_and_send_are_coroutines() -> None:
    assert inspect.iscoroutinefunction(WebSocketsSansIOProtocol.receive)
    assert inspect.iscoroutinefunction(WebSocketsSansIOProtocol.send)


def test_auto_websockets_is_sansio() -> None:
    # Only the sansio protocol is wrapped; with another the budget is off (and logged).
    assert AutoWebSocketsProtocol is WebSocketsSansIOProtocol


@pytest.mark.parametrize("name", WS_READS)
async def test_websocket_attributes_we_read_exist(name: str) -> None:
    proto = WebSocketsSansIOProtocol(config=_config(), server_state=ServerState(), app_state={},
                                     _loop=asyncio.get_running_loop())
    proto.connection_made(MemoryTransport())
    assert hasattr(proto, name), f"uvicorn's WebSocketsSansIOProtocol no longer sets .{name}"


@pytest.mark.parametrize("name", SERVER_METHODS)
def test_server_methods_we_override_exist(name: str) -> None:
    assert inspect.iscoroutinefunction(getattr(uvicorn.Server, name, None))


@pytest.mark.parametrize("name", SERVER_READS)
def test_server_attributes_we_read_exist(name: str) -> None:
    assert hasattr(uvicorn.Server(_config()), name), f"uvicorn's Server no longer sets .{name}"


def test_config_accepts_every_option_we_pass() -> None:
    params = inspect.signature(uvicorn.Config).parameters
    missing = [k for k in [*uvicorn_options(ServerConfig(), "info"), "http", "ws"] if k not in params]
    assert not missing, f"uvicorn.Config no longer takes {missing}"
