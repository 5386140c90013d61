"""``openenv serve`` picks this package's server through ``openenv_make_server``; without it the
kernel's plain uvicorn, which says what is off."""

from __future__ import annotations

import logging

import pytest
import uvicorn

import openenv_serve_uvicorn.plugin as plugin
from openenv.context import ServerConfig
from openenv.plugins import PluginManager
from openenv.serving import make_server
from openenv_serve_uvicorn.server import HardenedServer


def test_the_hook_answers_the_hardened_server(caplog: pytest.LogCaptureFixture) -> None:
    pm = PluginManager(entry_points=[])
    pm.register(plugin, "serve_uvicorn")
    cfg = ServerConfig(max_connections=7, header_timeout_s=3.0, shutdown_timeout_s=9.0)
    with caplog.at_level(logging.WARNING, "openenv.server"):
        server = make_server(pm, object(), cfg, None, "info")
    assert isinstance(server, HardenedServer) and server.shutdown_timeout_s == 9.0
    http = server.config.http
    assert isinstance(http, type) and http.__name__.startswith("Guarded")
    assert server.config.ws == "auto"  # no ServerContext: no body budget to count against
    assert "plain uvicorn" not in caplog.text


def test_without_the_plugin_the_kernel_serves_plain_uvicorn_and_says_what_is_off(
        caplog: pytest.LogCaptureFixture) -> None:
    pm = PluginManager(entry_points=[])
    with caplog.at_level(logging.WARNING, "openenv.server"):
        server = make_server(pm, object(), ServerConfig(), None, "info")
    assert type(server) is uvicorn.Server
    assert server.config.http == "auto" and server.config.ws == "auto"
    assert "plain uvicorn" in caplog.text and "--max-connections" in caplog.text
    assert "install openenvkit-serve-uvicorn" in caplog.text.lower()
