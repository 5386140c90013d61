"""Registration: the ``rest`` transport is registered lazily, with its client connector."""

from __future__ import annotations

import importlib.metadata as md
import subprocess
import sys

from rest_support import make_plugin_manager

from openenv.interfaces import ClientConnector, ServerTransport


def test_registers_rest_transport_and_connector() -> None:
    entry = make_plugin_manager().catalog.transports.get("rest")
    assert entry.plugin == "rest"
    assert entry.ref == "openenv_transport_rest.server:RestTransport"
    assert entry.client == "openenv_transport_rest.client:HttpConnector"
    assert entry.description
    transport = entry.load()
    assert issubclass(transport, ServerTransport) and transport.name == "rest"
    connector = entry.load_client()
    assert issubclass(connector, ClientConnector) and connector.schemes == ("http", "https")
    assert entry.schemes == ("http", "https")  # read from the connector: declared once


def test_entry_point_is_declared() -> None:
    eps = {ep.name: ep.value for ep in md.entry_points(group="openenv")}
    assert eps.get("rest") == "openenv_transport_rest.plugin"


def test_registration_imports_nothing_heavy() -> None:
    code = (
        "import sys\n"
        "from openenv.plugins import PluginManager\n"
        "import openenv_transport_rest.plugin as p\n"
        "pm = PluginManager(strict=True, entry_points=[]); pm.register(p, name='rest')\n"
        "assert 'rest' in pm.catalog.transports\n"
        "loaded = [m for m in ('openenv_transport_rest.server', 'openenv_transport_rest.client', 'httpx',"
        " 'starlette.routing') if m in sys.modules]\n"
        "print(loaded)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
