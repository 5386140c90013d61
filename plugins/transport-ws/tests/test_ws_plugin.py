"""The plugin module: lazy registration of the ``ws`` transport and its connector."""

from __future__ import annotations

import subprocess
import sys

from ws_support import plugin_manager

from openenv.interfaces import ClientConnector, ServerTransport
from openenv_transport_ws.client import WebSocketConnector
from openenv_transport_ws.server import WebSocketTransport


def test_registers_ws_with_lazy_references() -> None:
    entry = plugin_manager().catalog.transports.get("ws")
    assert entry.plugin == "ws"
    assert entry.ref == "openenv_transport_ws.server:WebSocketTransport"
    assert entry.client == "openenv_transport_ws.client:WebSocketConnector"
    assert entry.description
    transport = entry.load()
    assert transport is WebSocketTransport and issubclass(transport, ServerTransport)
    assert transport.name == "ws"
    connector = entry.load_client()
    assert connector is WebSocketConnector and issubclass(connector, ClientConnector)
    # The schemes are declared once, on the connector class, and read from there.
    assert entry.schemes == WebSocketConnector.schemes == ("ws", "wss", "http", "https")


def test_importing_the_plugin_module_imports_nothing_heavy() -> None:
    code = (
        "import sys, openenv_transport_ws.plugin\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "{'websockets', 'starlette', 'uvicorn', 'pydantic', 'orjson'})\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == ""
