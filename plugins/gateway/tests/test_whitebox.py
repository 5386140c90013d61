"""The white-box loop (the kernel's ``MCPHarnessAdapter``) sampling through the gateway, on the
served echo_mcp env: the tool call runs in the env, and every step's ids are the gateway's capture."""

from __future__ import annotations

import json

import pytest

from openenv_gateway import CaptureGateway
from openenv_gateway.whitebox import GatewayModelError, gateway_model_step


@pytest.mark.requires_plugins("env-echo-mcp", "transport-ws", "provider-local")
def test_mcp_harness_adapter_samples_through_the_gateway(gateway: CaptureGateway) -> None:
    from openenv.core.generic_client import GenericEnvClient
    from openenv.core.harness import HarnessRunLimits, MCPHarnessAdapter, StepEnvSessionAdapter
    from openenv.tools import Tool

    client = GenericEnvClient.from_env("echo_mcp", use_docker=False).sync()
    client.reset()
    tools = [Tool(**t) for t in client.step({"type": "list_tools"}).observation["tools"]]
    session = StepEnvSessionAdapter(
        client, tool_specs=tools,
        action_builder=lambda name, args: {"type": "call_tool", "tool_name": name, "arguments": args},
        initial_messages_builder=lambda result, task: [{"role": "user", "content": json.dumps(result.observation)}])
    key = gateway.open_episode("white-box")
    try:
        result = MCPHarnessAdapter().run_white_box(gateway_model_step(gateway, key, model="tool"), session,
                                                   HarnessRunLimits(max_turns=3))
    finally:
        session.close()
    trace = gateway.close_episode(key)
    assert result.done and len(result.tool_trace) == 1 and result.tool_trace[0].result.error is None
    assert [m["role"] for m in result.messages] == ["user", "assistant", "tool", "assistant"]
    assert [t.branch for t in trace.turns] == [0, 0]  # the tool result extended the first turn exactly
    assert result.completion_ids == trace.turns[0].completion_ids + trace.turns[1].completion_ids
    assert result.logprobs == trace.turns[0].logprobs + trace.turns[1].logprobs


def test_a_step_without_engine_ids_is_refused(gateway: CaptureGateway) -> None:
    key = gateway.open_episode("no-ids")
    step = gateway_model_step(gateway, key, model="no-ids")
    with pytest.raises(GatewayModelError, match="no engine ids"):
        step([{"role": "user", "content": "x"}], [], {})
    with pytest.raises(GatewayModelError, match="502"):
        gateway_model_step(gateway, key, model="fail")([{"role": "user", "content": "x"}], [], {})
    gateway.close_episode(key)
