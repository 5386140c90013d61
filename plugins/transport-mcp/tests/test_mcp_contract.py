"""The ``mcp`` transport keeps the kit's transport contract (``openenv.testing.TransportContract``)."""

from __future__ import annotations

import openenv_transport_mcp.plugin
from openenv.plugins import PluginManager
from openenv.testing import TransportContract


def test_mcp_keeps_the_transport_contract() -> None:
    pm = PluginManager(strict=True, entry_points=[])  # this plugin alone
    pm.register(openenv_transport_mcp.plugin, name="mcp")
    contract = TransportContract("mcp", plugin_manager=pm)
    ran = contract.run()
    assert ran == (["check_served", "check_round_trip", "check_bad_request", "check_capacity"]
                   if contract.has_client else ["check_served"])
