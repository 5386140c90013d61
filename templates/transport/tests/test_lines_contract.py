"""The lines transport keeps the transport contract (real server on 127.0.0.1, real client)."""

from __future__ import annotations

import openenv_transport_lines.plugin
from openenv.plugins import PluginManager
from openenv.testing import TransportContract


def test_lines_keeps_the_transport_contract() -> None:
    pm = PluginManager(strict=True, entry_points=[])  # only this plugin, never ambient ones
    pm.register(openenv_transport_lines.plugin, name="lines")
    ran = TransportContract("lines", plugin_manager=pm).run()
    assert ran == ["check_served", "check_round_trip", "check_bad_request", "check_capacity"]
