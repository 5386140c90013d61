"""Registration: the plugin registers ``mcp`` lazily and wires the shared JSON-RPC handler."""

from __future__ import annotations

import subprocess
import sys

import httpx
from mcp_support import CalcEnv, make_app, running

import openenv_transport_mcp.plugin
from openenv.plugins import PluginManager


def test_registers_the_mcp_transport_lazily() -> None:
    pm = PluginManager(strict=True, entry_points=[])
    pm.register(openenv_transport_mcp.plugin)
    entry = pm.catalog.transports.get("mcp")
    assert entry.ref == "openenv_transport_mcp.server:McpTransport"
    code = ("import sys, openenv_transport_mcp.plugin; "
            "print(sorted(m for m in ('fastmcp', 'mcp', 'starlette', 'httpx', 'openenv_transport_mcp.server') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


def test_server_context_gets_the_handler_and_capabilities_advertise_mcp() -> None:
    app = make_app(CalcEnv)
    assert callable(app.state.ctx.mcp_handler)
    with running(app) as base:
        caps = httpx.get(base + "/capabilities", timeout=10).json()
        assert "mcp" in caps["transports"] and "mcp" in caps["extensions"]
        assert "2025-06-18" in caps["mcp_protocol_versions"]
        schema = httpx.get(base + "/schema", timeout=10).json()
        assert {s["$ref"].rsplit("/", 1)[-1] for s in schema["action"]["oneOf"]} == {"ListToolsAction",
                                                                                     "CallToolAction"}


def test_protocol_versions_cover_the_installed_sdk() -> None:
    try:
        from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
    except ImportError:  # mcp 1.x
        from mcp.shared.version import SUPPORTED_PROTOCOL_VERSIONS as HANDSHAKE_PROTOCOL_VERSIONS

    from openenv_transport_mcp.handler import SUPPORTED_PROTOCOL_VERSIONS

    # If the SDK learns a newer handshake revision, this tells us to review and add it.
    assert set(HANDSHAKE_PROTOCOL_VERSIONS) <= set(SUPPORTED_PROTOCOL_VERSIONS)
