"""``echo_mcp`` keeps the kit's env contract, stepping through its tools."""

from __future__ import annotations

from openenv.testing import EnvContract
from openenv_env_echo_mcp.env import EchoMcpEnv


def test_echo_mcp_keeps_the_env_contract() -> None:
    actions = [{"type": "list_tools"},
               {"type": "call_tool", "tool_name": "echo_message", "arguments": {"message": "hi"}}]
    ran = EnvContract(EchoMcpEnv, valid_actions=actions).run()
    assert {"check_reset", "check_seeding", "check_step", "check_invalid_action"} <= set(ran)
