"""TRL's own OpenEnv helpers (``trl.experimental.async_grpo.openenv_harness``) import against this
OpenEnv and drive a rollout through ``openenv.core.harness``."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("trl.experimental.async_grpo", reason="needs trl with its async GRPO harness (nox -s trl)")


def test_trls_openenv_harness_runs_against_our_core_harness(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    from trl.experimental.async_grpo import openenv_harness as peer

    from openenv.core.generic_client import GenericEnvClient
    from openenv.core.harness import MCPHarnessAdapter, ModelStepResult, StepEnvSessionAdapter
    from openenv.tools import Tool

    client = GenericEnvClient.from_env("echo_mcp", use_docker=False).sync()
    client.reset()
    tools = [Tool(**t) for t in client.step({"type": "list_tools"}).observation["tools"]]
    session = StepEnvSessionAdapter(
        client, tool_specs=tools,
        action_builder=lambda name, args: {"type": "call_tool", "tool_name": name, "arguments": args},
        initial_messages_builder=lambda result, task: [{"role": "user", "content": "echo something"}])
    schema = peer._tools_to_schema(session.list_tools())  # TRL's conversion of our Tool objects
    assert {s["function"]["name"] for s in schema} == {"echo_message", "echo_with_length"}
    replies = iter([
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "echo_message", "arguments": '{"message": "yo"}'}}]},
        {"role": "assistant", "content": "done"},
    ])

    def model_step(messages, tools, sampling):
        return ModelStepResult(response=peer._msg_to_llm_response(next(replies)))  # TRL builds our LLMResponse

    try:
        result = MCPHarnessAdapter().run_white_box(model_step, session)
    finally:
        session.close()
    assert result.done and [e.tool_name for e in result.tool_trace] == ["echo_message"]
    assert json.loads(result.messages[2]["content"])["observation"]["result"]["data"] == "yo"
