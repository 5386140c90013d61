"""Upstream's trainer-facing imports: ``openenv.core.harness``, ``openenv.core.llm_client`` types and
``GenericEnvClient.from_env(name, use_docker=False)``, driven against a real local env server."""

from __future__ import annotations

import json
from typing import Any

import pytest

from openenv.core._unsupported import UnsupportedFeature


def test_llm_types_keep_upstreams_fields_and_clients_are_refused() -> None:
    from openenv.core.llm_client import LLMResponse, ToolCall

    msg = LLMResponse("hi", [ToolCall(id="c1", name="echo", args={"message": "x"})]).to_message_dict()
    assert msg == {"role": "assistant", "content": "hi", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "echo", "arguments": '{"message": "x"}'}}]}
    assert LLMResponse("plain").to_message_dict() == {"role": "assistant", "content": "plain"}
    # Importing works (issue 32: unsupported names fail only where used); using them fails.
    from openenv.core.llm_client import OpenAIClient

    with pytest.raises(UnsupportedFeature, match="SDK"):
        OpenAIClient()


def test_rfc005_names_come_from_the_gateway_plugin() -> None:
    # Upstream's RFC 005 turn-based harness is provided by openenvkit-gateway (installed here).
    from openenv.core.env_server.mcp_environment import MCPEnvironment
    from openenv.core.harness import HarnessConfig, HarnessEnvironment
    from openenv_gateway.agentic.environment import HarnessEnvironment as Ours

    assert HarnessEnvironment is Ours and issubclass(HarnessEnvironment, MCPEnvironment)
    assert HarnessConfig(name="x", command=["true"]).session_timeout_s == 600.0


def test_from_env_maps_hub_names_to_installed_envs_and_refuses_unknown_ones() -> None:
    from openenv.core.generic_client import GenericEnvClient
    from openenv.errors import UnknownNameError

    client = GenericEnvClient.from_env("openenv/echo-env", use_docker=False).sync()
    try:
        assert client.reset().observation["echoed_message"] == "ready"
        assert client.step({"message": "hey"}).reward == pytest.approx(0.3)
    finally:
        client.close()
    with pytest.raises(UnknownNameError, match="Did you mean 'echo'"):
        GenericEnvClient.from_env("openenv/echoo-env", use_docker=False)


def test_the_top_level_client_has_from_env_too() -> None:
    # verifiers' OpenEnv taskset: `from openenv import GenericEnvClient`, then
    # `client = await GenericEnvClient.from_env(name, use_docker=False)` and `async with client:`
    import asyncio

    from openenv import GenericEnvClient
    from openenv.errors import ConfigError, UnknownNameError

    async def play() -> tuple[str, float | None, bool]:
        client = await GenericEnvClient.from_env("openenv/echo-env", use_docker=False)
        async with client:
            first = await client.reset()
            second = await client.step({"message": "hey"})
        return first.observation["echoed_message"], second.reward, client.connected

    message, reward, connected = asyncio.run(play())
    assert message == "ready" and reward == pytest.approx(0.3) and not connected
    with pytest.raises(UnknownNameError, match="Did you mean 'echo'"):
        asyncio.run(GenericEnvClient.from_env("echoo", use_docker=False))
    with pytest.raises(ConfigError, match="use_docker=False"):
        asyncio.run(GenericEnvClient.from_env("echo"))  # upstream's default: pull the Space's image


def test_mcp_harness_adapter_runs_a_white_box_rollout_on_an_mcp_env() -> None:
    from openenv.core.generic_client import GenericEnvClient
    from openenv.core.harness import (
        HarnessRunLimits,
        MCPHarnessAdapter,
        ModelStepResult,
        StepEnvSessionAdapter,
    )
    from openenv.core.llm_client import LLMResponse, ToolCall
    from openenv.tools import Tool

    client = GenericEnvClient.from_env("echo_mcp", use_docker=False).sync()
    client.reset()
    tools = [Tool(**t) for t in client.step({"type": "list_tools"}).observation["tools"]]
    session = StepEnvSessionAdapter(
        client, tool_specs=tools, seed=3,
        action_builder=lambda name, args: {"type": "call_tool", "tool_name": name, "arguments": args},
        initial_messages_builder=lambda result, task: [{"role": "user", "content": json.dumps(result.observation)}])
    seen: list[list[Any]] = []

    def model_step(messages: list[dict[str, Any]], tools: list[Any], sampling: dict[str, Any]) -> ModelStepResult:
        seen.append([m["role"] for m in messages])
        calls = [ToolCall(id="c1", name="echo_with_length", args={"message": "hello"})] if len(seen) == 1 else []
        return ModelStepResult(LLMResponse("ok", calls), prompt_ids=[1, 2], completion_ids=[3], logprobs=[-0.5])

    try:
        result = MCPHarnessAdapter().run_white_box(model_step, session, HarnessRunLimits(max_turns=4))
        verdict = session.verify(result.messages)
    finally:
        session.close()
    assert result.done and result.metrics == {"turns": 2, "tool_calls": 1}
    assert [m["role"] for m in result.messages] == ["user", "assistant", "tool", "assistant"]
    assert '"length": 5' in result.messages[2]["content"]
    assert result.completion_ids == [3, 3] and result.logprobs == [-0.5, -0.5]
    assert seen[1] == ["user", "assistant", "tool"]
    assert verdict.metrics["step_count"] == 1 and verdict.artifacts["transcript_length"] == 4


def test_build_harness_rollout_func_returns_trls_fields_with_the_envs_reward() -> None:
    from openenv.core.generic_client import GenericEnvClient
    from openenv.core.harness import (
        HarnessRolloutResult,
        HarnessRunLimits,
        MCPHarnessAdapter,
        ModelStepResult,
        ResourceSessionFactory,
        StepEnvSessionAdapter,
        ToolResult,
        ToolTraceEntry,
        VerifyResult,
        build_harness_rollout_func,
        env_reward_of,
    )
    from openenv.core.llm_client import LLMResponse, ToolCall
    from openenv.tools import Tool

    class Sessions(ResourceSessionFactory[StepEnvSessionAdapter]):
        def create(self, task: Any, seed: int | None = None, episode_id: str | None = None) -> StepEnvSessionAdapter:
            # the echo env scores each step (0.1 per character): its one action offered as a tool
            client = GenericEnvClient.from_env("echo", use_docker=False).sync()
            tools = [Tool(name="say", description="Say something", input_schema={
                "type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]})]
            return StepEnvSessionAdapter(
                client, task=task, tool_specs=tools, action_builder=lambda name, args: {"message": args["message"]},
                initial_messages_builder=lambda result, task: [{"role": "user", "content": str(task)}])

    def model_step_builder(trainer: Any, session: Any) -> Any:
        calls = {"n": 0}

        def step(messages: list[dict[str, Any]], tools: list[Any], sampling: dict[str, Any]) -> ModelStepResult:
            calls["n"] += 1
            words = messages[0]["content"]
            tool_calls = [ToolCall(id="c", name="say", args={"message": words})] if calls["n"] == 1 else []
            return ModelStepResult(LLMResponse("ok", tool_calls), prompt_ids=[1], completion_ids=[2], logprobs=[-0.1])

        return step

    rollout_func = build_harness_rollout_func(session_factory=Sessions(), harness_adapter=MCPHarnessAdapter(),
                                              model_step_builder=model_step_builder,
                                              limits=HarnessRunLimits(max_turns=3))
    out = rollout_func(["hi", "hello"], None)
    assert set(out) == {"prompt_ids", "completion_ids", "logprobs", "env_reward", "verify_metrics"}
    assert out["completion_ids"] == [[2, 2], [2, 2]] and out["logprobs"] == [[-0.1, -0.1]] * 2
    assert out["env_reward"] == pytest.approx([0.2, 0.5])  # the echo env's own reward for "hi", "hello"
    # the reward is the env's: never made up, and a verify step may not contradict it
    empty = HarnessRolloutResult()
    with pytest.raises(ValueError, match="no environment reward"):
        env_reward_of(empty, VerifyResult())
    traced = HarnessRolloutResult(tool_trace=[ToolTraceEntry("t", {}, ToolResult(metadata={"reward": 1.0}))])
    assert env_reward_of(traced, VerifyResult()) == 1.0
    with pytest.raises(ValueError, match="must forward"):
        env_reward_of(traced, VerifyResult(env_reward=0.0))


def test_training_sampling_and_traces_are_validated() -> None:
    from openenv.core.harness import TrainingTrace
    from openenv.core.harness.capture.upstream import training_sampling

    assert training_sampling({"temperature": 1.0, "top_p": 1.0}) == {"temperature": 1.0, "top_p": 1.0}
    for bad in ({"top_p": 1.0}, {"temperature": 1.0, "top_p": 0.9}, {"temperature": 1.0, "beam": 2}):
        with pytest.raises(ValueError):
            training_sampling(bad)
    entry = {"metadata": {"node_id": "n1"}, "prompt_token_ids": [1], "completion_token_ids": [2, 3],
             "per_token_logps": [-0.1, -0.2], "loss_mask": [0, 1, 1]}
    trace = TrainingTrace.from_entries([entry])
    assert trace.to_trace_entries()[0]["metadata"]["node_id"] == "n1"
    with pytest.raises(ValueError, match="align"):
        TrainingTrace.from_entries([{**entry, "per_token_logps": [-0.1]}])
    with pytest.raises(ValueError, match="duplicate"):
        TrainingTrace.from_entries([entry, entry])
