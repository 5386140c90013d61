"""Upstream's RFC 005 turn-based harness: the names, HarnessEnvironment driven directly with the
shipped CommandTurnAdapter and a real agent program (agents/turn_agent.py), its model calls
captured by a CaptureGateway in front of the scripted upstream, its tool calls through the bridge."""

from __future__ import annotations

import sys
import threading
import uuid

import pytest
from agentic_support import AGENT, adapter, processes_with, tools_server

from openenv.tools import CallToolAction, ListToolsAction
from openenv.tools.wire import Tool
from openenv_gateway import CaptureGateway, agentic
from openenv_gateway.agentic import (
    HarnessAction,
    HarnessConfig,
    HarnessEnvironment,
    HarnessError,
    HarnessNotRunningError,
    HarnessStartupError,
    resolve_tool_conflicts,
)
from openenv_gateway.agentic.bridge import HarnessMCPBridge, build_bridge_server


def _threads() -> set[str]:
    """Threads other than the event loop's default executor (its workers idle on, by design)."""
    return {t.name for t in threading.enumerate() if not t.name.startswith("asyncio_")}


def _marker() -> str:
    return "openenv-turn-" + uuid.uuid4().hex


def test_every_rfc005_name_is_importable_from_openenv_core_harness() -> None:
    import openenv.core.harness as harness

    for name in agentic.UPSTREAM_NAMES:
        assert getattr(harness, name) is getattr(agentic, name), name
    assert len(agentic.UPSTREAM_NAMES) == 18


def test_config_keeps_upstreams_defaults_and_refuses_what_it_does_not_know() -> None:
    config = HarnessConfig(name="h", command=["run"])
    assert (config.working_directory, config.transport.value, config.startup_timeout_s,
            config.session_timeout_s, config.mcp_config_path) == ("/workspace", "stdio", 30.0, 600.0, None)
    with pytest.raises(ValueError, match="at least one element"):
        HarnessConfig(name="h", command=[])
    with pytest.raises(ValueError, match="extra"):
        HarnessConfig(name="h", command=["run"], comand=["typo"])


def test_tool_conflicts_are_renamed_or_refused_never_silently_overridden() -> None:
    def tool(name: str) -> Tool:
        return Tool(name=name, description="", input_schema={"type": "object"})

    tools = [tool("read"), tool("add")]
    assert [t.name for t in resolve_tool_conflicts(tools, {"read"})] == ["env_read", "add"]
    assert [t.name for t in tools] == ["read", "add"]  # the input is left alone
    with pytest.raises(ValueError, match="reserved"):
        resolve_tool_conflicts([tool("step")], set())
    with pytest.raises(ValueError, match="Duplicate"):
        resolve_tool_conflicts([tool("a"), tool("a")], set())
    with pytest.raises(ValueError, match="also taken"):
        resolve_tool_conflicts([tool("read"), tool("env_read")], {"read"})


async def test_a_renamed_tool_stays_callable_through_the_bridge() -> None:
    from fastmcp import Client

    server = await build_bridge_server(tools_server(), {"env_add": "add"})
    bridge = HarnessMCPBridge(server)
    url = bridge.start()
    try:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
        async with Client(url) as client:
            assert [t.name for t in await client.list_tools()] == ["env_add"]
            assert (await client.call_tool("env_add", {"a": 4, "b": 5})).data == 9
    finally:
        bridge.stop()
        bridge.stop()  # idempotent
    assert bridge.url is None
    with pytest.raises(HarnessError, match="does not expose: nope"):
        await build_bridge_server(tools_server(), {"x": "nope"})
    with pytest.raises(ValueError, match=r"127\.0\.0\.1"):
        HarnessMCPBridge(server, host="0.0.0.0")


async def test_turns_call_the_injected_tool_and_the_model_through_the_capture_gateway(
        gateway: CaptureGateway) -> None:
    marker = _marker()
    scored: list[str] = []

    class Rubric:  # per turn: 1.0 when the tool's sum is in the answer
        def __call__(self, action: HarnessAction, observation: object) -> float:
            scored.append(action.message)
            return 1.0 if "/ 5" in observation.metadata["response"] else 0.0  # type: ignore[attr-defined]

        def reset(self) -> None:
            scored.append("reset")

    rubric = Rubric()

    harness = adapter(marker, gateway=gateway)
    env = HarnessEnvironment(harness, tools_server(), rubric=rubric)
    try:
        reset = await env.reset_async(episode_id="ep-1")
        assert reset.metadata == {"episode_id": "ep-1", "injected_tools": ["env_add"]} and not reset.done
        obs = await env.step_async(HarnessAction(message="both"))
        assert obs.metadata["response"] == "ok 1 / 5" and obs.reward == 1.0 and not obs.done
        kinds = [e["type"] for e in obs.metadata["turn_events"]]
        assert kinds == ["llm_request", "llm_response", "tool_call", "tool_result", "turn_complete"]
        assert obs.metadata["turn_number"] == 1 and env.state.step_count == 1
        # MCP routing is kept: the env's own tool names on the step path
        listed = await env.step_async(ListToolsAction())
        assert [t.name for t in listed.tools] == ["add"]  # type: ignore[attr-defined]
        called = await env.step_async(CallToolAction(tool_name="add", arguments={"a": 1, "b": 1}))
        assert called.result["data"] == 2  # type: ignore[attr-defined]
        chatty = await env.step_async(HarnessAction(message="chatty"))
        assert chatty.metadata["turn_events"][0] == {**chatty.metadata["turn_events"][0], "type": "text_output",
                                                     "data": {"text": "this line is not JSON"}}
        done = await env.step_async(HarnessAction(message="done"))
        assert done.done and done.metadata["response"] == "finished" and done.metadata["turn_number"] == 3
        assert len(env.trajectory) == 5 + 2 + 1 and scored == ["reset", "both", "chatty", "done"]
        assert len(processes_with(marker)) == 1
    finally:
        await env.close_async()
    # the model call was captured, under the episode the adapter opened for this harness run
    [trace] = harness.traces
    assert trace.meta["harness"] == "turn-agent" and len(trace.turns) == 1
    assert processes_with(marker) == []


async def test_a_crashed_or_hung_harness_ends_the_episode_and_leaves_nothing() -> None:
    marker = _marker()
    threads = _threads()
    env = HarnessEnvironment(adapter(marker, session_timeout_s=30.0), tools_server())
    try:
        await env.reset_async()
        spawned = await env.step_async(HarnessAction(message="spawn"))
        helper = int(spawned.metadata["response"])
        assert helper in processes_with(marker)
        crashed = await env.step_async(HarnessAction(message="crash"))
        assert crashed.done and crashed.metadata["error_type"] == "harness_crashed"
        assert crashed.metadata["error"] == "harness event stream ended without a TURN_COMPLETE event"
        assert [e["type"] for e in crashed.metadata["turn_events"]] == ["text_output", "error"]
        assert crashed.metadata["turn_events"][-1]["data"] == {"message": crashed.metadata["error"],
                                                               "recoverable": False}
        assert processes_with(marker) == []  # the helper died with the harness's process group
        with pytest.raises(HarnessNotRunningError, match="call reset"):
            await env.step_async(HarnessAction(message="again"))

        await env.reset_async()
        hung = await env.step_async(HarnessAction(message="hang"), timeout_s=1.0)
        assert hung.done and hung.metadata == {**hung.metadata, "error": "harness turn exceeded 1.0 seconds",
                                               "error_type": "turn_timeout"}
        assert processes_with(marker) == []

        await env.reset_async()
        env.adapter.process.stop_now()  # type: ignore[attr-defined]  # the harness dies between turns
        dead = await env.step_async(HarnessAction(message="hello"))
        assert dead.done and dead.metadata["error"] == "harness process is not running"
    finally:
        env.close()
        env.close()  # idempotent
    assert processes_with(marker) == []
    assert _threads() <= threads, _threads()


async def test_a_harness_that_never_becomes_ready_fails_reset_and_leaves_nothing() -> None:
    marker = _marker()
    silent = [sys.executable, "-c", "import time; time.sleep(60)", marker]
    env = HarnessEnvironment(adapter(marker, command=silent, startup_timeout_s=0.5), tools_server())
    with pytest.raises(HarnessStartupError, match=r"did not become ready within 0\.5s"):
        await env.reset_async()
    assert processes_with(marker) == [] and env._bridge is None
    gone = HarnessEnvironment(adapter(marker, command=[sys.executable, "-c", "raise SystemExit(4)"]))
    with pytest.raises(HarnessStartupError, match="exited with code 4"):
        await gone.reset_async()
    missing = HarnessEnvironment(adapter(marker, command=["/nonexistent/harness"]))
    with pytest.raises(HarnessStartupError, match="failed to spawn"):
        await missing.reset_async()
    for e in (env, gone, missing):
        await e.close_async()


def test_the_sync_facades_run_a_turn() -> None:
    marker = _marker()
    env = HarnessEnvironment(adapter(marker), tools_server())
    try:
        env.reset()
        assert env.step(HarnessAction(message="hi")).metadata["response"] == "echo: hi"
        assert AGENT in " ".join(env.adapter.config.command)
    finally:
        env.close()
    assert processes_with(marker) == []
