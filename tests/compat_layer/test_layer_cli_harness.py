"""Upstream's black-box adapter as an upstream caller uses it: ``from openenv.core.harness import
CLIHarnessAdapter``, ``CLIHarnessAdapter(runner).run_black_box(session, limits)``, here with the
gateway plugin's ``CommandRunner``: an agent program on the coding env's ``two_sum`` task, its model
call captured by the gateway (a scripted upstream), its answer submitted through the session's tool
and graded by the env's hidden tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.requires_plugins("gateway", "env-coding")

#: An agent program with no SDK: ``OPENENV_CALLS`` model calls through the gateway (stdlib HTTP),
#: each status printed, then a correct ``two_sum`` in solution.py.
AGENT = '''
import json, os, urllib.error, urllib.request
for _ in range(int(os.environ.get("OPENENV_CALLS", "1"))):
    request = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", method="POST",
        data=json.dumps({"model": "m",
                         "messages": [{"role": "user", "content": os.environ["OPENENV_PROMPT"]}]}).encode(),
        headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "Content-Type": "application/json"})
    try:
        print(urllib.request.urlopen(request, timeout=60).status)
    except urllib.error.HTTPError as exc:
        print(exc.code, json.loads(exc.read())["error"]["code"])
open("solution.py", "w").write(
    "def two_sum(nums, target):\\n    seen = {}\\n    for j, n in enumerate(nums):\\n"
    "        if target - n in seen:\\n            return (seen[target - n], j)\\n"
    "        seen[n] = j\\n    return None\\n")
'''


#: An agent program that submits through the session's tools itself (``OPENENV_TOOLS_URL``, JSON-RPC).
TOOL_AGENT = '''
import json, os, urllib.request
def rpc(method, params=None):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}).encode()
    request = urllib.request.Request(os.environ["OPENENV_TOOLS_URL"], data=body, method="POST",
        headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(request, timeout=60).read())
names = [t["name"] for t in rpc("tools/list")["result"]["tools"]]
answer = rpc("tools/call", {"name": names[0], "arguments": {"code": "def two_sum(nums, target):\\n    return None\\n"}})
print("reward", answer["result"]["metadata"]["reward"])
'''


@pytest.fixture(scope="module")
def gateway() -> Iterator[Any]:
    from openenv_gateway import CaptureGateway
    from openenv_gateway.testing.process import ServerProcess

    with ServerProcess([sys.executable, "-m", "openenv_gateway.testing.scripted", "--port", "0"]) as upstream:
        gw = CaptureGateway(upstream.base_url)
        gw.start()
        yield gw
        gw.stop()


def _session() -> Any:
    from openenv.core.generic_client import GenericEnvClient
    from openenv.core.harness import StepEnvSessionAdapter, ToolResult
    from openenv.tools import Tool

    client = GenericEnvClient.from_env("coding", use_docker=False).sync()
    submit = Tool(name="submit", description="Submit the solution", input_schema={
        "type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]})
    return StepEnvSessionAdapter(
        client, tool_specs=[submit], reset_kwargs={"task_id": "two_sum"},
        action_builder=lambda name, args: {"code": args["code"], "submit": True},
        initial_messages_builder=lambda result, task: [{"role": "user", "content": result.observation["prompt"]}],
        tool_result_builder=lambda name, args, result, state: ToolResult(
            data=result.observation, done=bool(result.done), metadata={"reward": result.reward}))


def test_cli_harness_adapter_runs_an_agent_program_through_the_gateway(gateway: Any, tmp_path: Path) -> None:
    from openenv.core.harness import CLIHarnessAdapter, HarnessRunLimits
    from openenv_gateway.cliharness import CommandRunner
    from openenv_gateway.harness import CommandHarness

    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    runner = CommandRunner(CommandHarness(gateway, [sys.executable, str(agent)], deadline_s=120, grade_reserve_s=30),
                           answer_tool="submit", answer_argument="code", task_id="two_sum")
    adapter = CLIHarnessAdapter(runner)
    session = _session()
    try:
        result = adapter.run_black_box(session, HarnessRunLimits(max_turns=4))
        with pytest.raises(NotImplementedError, match="black-box"):
            adapter.run_white_box(lambda *a: None, session)  # type: ignore[arg-type,return-value]
    finally:
        session.close()
    assert result.metrics["error"] is None, result.metrics
    # the env's hidden tests passed the agent's solution, submitted through the session's tool
    assert result.metrics["env_reward"] == 1.0 and result.done
    [entry] = result.tool_trace
    assert entry.tool_name == "submit" and "def two_sum" in entry.arguments["code"]
    assert entry.result.metadata["reward"] == 1.0 and entry.result.data["tests_passed"] == entry.result.data[
        "tests_total"]
    # the model call, captured with the engine's ids (the scripted engine's: ChatML bytes)
    assert result.metrics["model_calls"] == 1 and [e.type for e in result.events] == ["model_call"]
    assert result.events[0].payload["ids_source"] == "engine"
    assert bytes(i for i in result.prompt_ids if i < 256).decode().endswith("assistant\n")
    assert "two_sum" in bytes(i for i in result.prompt_ids if i < 256).decode()
    assert result.completion_ids and len(result.logprobs) == len(result.completion_ids)
    assert [m["role"] for m in result.messages] == ["user", "assistant"]


def test_limits_max_turns_is_enforced_by_the_gateway(gateway: Any, tmp_path: Path) -> None:
    from openenv.core.harness import CLIHarnessAdapter, HarnessRunLimits
    from openenv_gateway.cliharness import CommandRunner
    from openenv_gateway.harness import CommandHarness

    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    harness = CommandHarness(gateway, [sys.executable, str(agent)], deadline_s=120, grade_reserve_s=30,
                             extra_env={"OPENENV_CALLS": "4"})
    session = _session()
    try:
        result = CLIHarnessAdapter(CommandRunner(harness, answer_tool="submit")).run_black_box(
            session, HarnessRunLimits(max_turns=2))
    finally:
        session.close()
    assert result.metrics["model_calls"] == 2  # the 3rd and 4th calls were refused
    assert result.metrics["env_reward"] == 1.0  # the agent still answered, and was graded


def test_the_bridge_answers_json_rpc_and_refuses_what_is_not_a_tool() -> None:
    from openenv.core.harness import SessionMCPBridge

    session = _session()
    try:
        bridge = SessionMCPBridge(session)
        listed = bridge.handle_request({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        assert [t["name"] for t in listed["result"]["tools"]] == ["submit"]
        assert bridge.handle_request({"id": 2, "method": "tools/list"})["error"]["code"] == -32600
        assert bridge.handle_request({"jsonrpc": "2.0", "id": 3, "method": "nope"})["error"]["code"] == -32601
        reserved = bridge.handle_request({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                                          "params": {"name": "step", "arguments": {}}})
        assert reserved["error"]["code"] == -32602 and "reserved" in reserved["error"]["message"]
        unknown = bridge.handle_request({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                                         "params": {"name": "sumbit", "arguments": {}}})
        assert unknown["error"]["code"] == -32601 and "submit" in unknown["error"]["message"]
        called = bridge.handle_request({"jsonrpc": "2.0", "id": 6, "method": "tools/call",
                                        "params": {"name": "submit", "arguments": {"code": "x = 1\n"}}})
        assert called["id"] == 6 and called["result"]["done"] and called["result"]["metadata"]["reward"] == 0.0
        assert len(bridge.tool_trace) == 1
    finally:
        session.close()


def test_the_kernel_imports_no_gateway_and_names_the_package_when_it_is_missing() -> None:
    code = ("import sys; import openenv.core.harness as h; assert 'openenv_gateway' not in sys.modules; "
            "sys.modules['openenv_gateway'] = None\n"
            "from openenv.core.harness import CLIHarnessAdapter\n"
            "try:\n    CLIHarnessAdapter(lambda *a: None)\nexcept ImportError as exc:\n    print(json.dumps(str(exc)))")
    # The gateway plugin absent: not loaded (OPENENV_DISABLE_PLUGINS), and not importable either.
    out = subprocess.run([sys.executable, "-c", "import json\n" + code], capture_output=True, text=True, timeout=120,
                         check=True, env={**os.environ, "OPENENV_DISABLE_PLUGINS": "gateway"}).stdout
    message = json.loads(out)
    assert "pip install openenvkit-gateway" in message and "CLIHarnessAdapter" in message
    rfc005 = code.replace("CLIHarnessAdapter(lambda *a: None)", "HarnessEnvironment(None)").replace(
        "import CLIHarnessAdapter", "import HarnessEnvironment")
    out = subprocess.run([sys.executable, "-c", "import json\n" + rfc005], capture_output=True, text=True,
                         timeout=120, check=True, env={**os.environ, "OPENENV_DISABLE_PLUGINS": "gateway"}).stdout
    message = json.loads(out)
    assert "pip install openenvkit-gateway" in message and "RFC 005" in message


def test_the_agent_program_calls_the_sessions_tools_itself_through_the_gateway(gateway: Any, tmp_path: Path) -> None:
    from openenv.core.harness import CLIHarnessAdapter, HarnessRunLimits
    from openenv_gateway.cliharness import CommandRunner
    from openenv_gateway.harness import CommandHarness

    agent = tmp_path / "agent.py"
    agent.write_text(TOOL_AGENT)
    harness = CommandHarness(gateway, [sys.executable, str(agent)], deadline_s=120, grade_reserve_s=30)
    session = _session()
    try:
        result = CLIHarnessAdapter(CommandRunner(harness)).run_black_box(session, HarnessRunLimits())
    finally:
        session.close()
    assert result.metrics["error"] is None, result.metrics
    # the agent's own tools/call reached the env, nothing else did; the env graded it: `return None` passes
    # only the hidden test whose answer is None (1 of 4), and that is the rollout's reward
    [entry] = result.tool_trace
    assert entry.tool_name == "submit" and "return None" in entry.arguments["code"]
    assert entry.result.data["tests_passed"] == 1 and entry.result.data["tests_total"] == 4
    assert result.metrics["env_reward"] == entry.result.metadata["reward"] == 0.25
    assert result.metrics["model_calls"] == 0 and result.prompt_ids == []


#: A shell agent: the tools as the `openenv-tool` command on its PATH (the answer read from a file).
SHELL_AGENT = '''
set -e
openenv-tool list
openenv-tool schema submit | grep -q '"code"'
cat > solution.py <<'PY'
def two_sum(nums, target):
    seen = {}
    for j, n in enumerate(nums):
        if target - n in seen:
            return (seen[target - n], j)
        seen[n] = j
    return None
PY
if openenv-tool call sumbit code=@solution.py 2> typo.txt; then exit 9; fi
grep -q "submit" typo.txt
openenv-tool call submit code=@solution.py
'''

#: An MCP client agent (the official `mcp` SDK), configured from the `.mcp.json` the harness wrote.
MCP_AGENT = '''
import asyncio, json
import httpx2, mcp
from mcp.client.streamable_http import streamable_http_client
server = json.load(open(".mcp.json"))["mcpServers"]["openenv"]
async def main():
    http = httpx2.AsyncClient(headers=server["headers"])
    async with mcp.Client(streamable_http_client(server["url"], http_client=http)) as client:
        [tool] = (await client.list_tools()).tools
        result = await client.call_tool(tool.name, {"code": "def two_sum(nums, target):\\n    return None\\n"})
        print("reward", result.structured_content["metadata"]["reward"])
asyncio.run(main())
'''


@pytest.mark.parametrize("kind", ["shell", "mcp"])
def test_the_agent_gets_the_tools_as_a_command_and_as_an_mcp_server(gateway: Any, tmp_path: Path, kind: str) -> None:
    from openenv.core.harness import CLIHarnessAdapter, HarnessRunLimits
    from openenv_gateway.cliharness import CommandRunner
    from openenv_gateway.harness import CommandHarness

    if kind == "mcp":
        pytest.importorskip("mcp")
    agent = tmp_path / ("agent.sh" if kind == "shell" else "agent.py")
    agent.write_text(SHELL_AGENT if kind == "shell" else MCP_AGENT)
    command = ["/bin/sh", str(agent)] if kind == "shell" else [sys.executable, str(agent)]
    harness = CommandHarness(gateway, command, deadline_s=120, grade_reserve_s=30)
    session = _session()
    try:
        result = CLIHarnessAdapter(CommandRunner(harness)).run_black_box(session, HarnessRunLimits())
    finally:
        session.close()
    assert result.metrics["error"] is None, result.metrics
    [entry] = result.tool_trace  # the misspelt call was refused before reaching the env
    assert entry.tool_name == "submit"
    expected = 1.0 if kind == "shell" else 0.25  # the shell agent's solution passes all 4 hidden tests
    assert result.metrics["env_reward"] == entry.result.metadata["reward"] == expected
