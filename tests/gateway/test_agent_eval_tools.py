"""``openenv agent-eval harbor --tools act``: a black-box agent program acts in a Harbor task's box
through the env's action offered as a tool (the ``openenv-tool`` command on its PATH), its model
call captured by the gateway (the scripted upstream), and the task graded in a fresh box."""

from __future__ import annotations

import json
import os
import secrets
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.bwrap,
              pytest.mark.requires_plugins("gateway", "harbor", "provider-local", "transport-ws", "rollouts")]

#: The agent: one model call through the gateway, then the fix run in the task's box with
#: `openenv-tool call act ...` (the env's own action), and a look at the result.
AGENT = r'''
import json, os, subprocess, urllib.request
body = json.dumps({"model": "m", "messages": [{"role": "user", "content": os.environ["OPENENV_PROMPT"]}]}).encode()
request = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body, method="POST",
    headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "Content-Type": "application/json"})
urllib.request.urlopen(request, timeout=60).read()
print(subprocess.run(["openenv-tool", "list"], capture_output=True, text=True, check=True).stdout)
fix = "command=sed -i 's/return a - b/return a + b/' /app/calc.py"
subprocess.run(["openenv-tool", "call", "act", fix], check=True)
shown = subprocess.run(["openenv-tool", "call", "act", "command=grep -n return /app/calc.py"],
                       capture_output=True, text=True, check=True).stdout
assert "a + b" in shown, shown
'''


@pytest.fixture(scope="module")
def scripted() -> Iterator[str]:
    from openenv_gateway.testing.process import ServerProcess

    with ServerProcess([sys.executable, "-m", "openenv_gateway.testing.scripted", "--port", "0"]) as upstream:
        yield upstream.base_url


@pytest.fixture(scope="module")
def harbor_server() -> Iterator[tuple[str, str]]:
    from openenv.interfaces import LaunchSpec
    from openenv.plugins import get_plugin_manager
    from openenv_harbor.box import bwrap_problem

    reason = bwrap_problem()
    if reason:
        if os.environ.get("OPENENV_REQUIRE_BWRAP", "").lower() in {"1", "true", "yes"}:
            pytest.fail(f"OPENENV_REQUIRE_BWRAP is set but {reason}", pytrace=False)
        pytest.skip(reason)
    pm = get_plugin_manager()
    provider = pm.catalog.providers.load(pm.choose_provider("harbor", None))()
    token = secrets.token_urlsafe(16)
    from openenv_harbor.env import DEMO_SUITE

    handle = provider.start(LaunchSpec(env=f"harbor:{DEMO_SUITE}", max_sessions=4, token=token))
    yield handle.base_url, token
    handle.stop()


def test_the_cli_plays_a_harbor_task_with_an_agent_acting_through_the_act_tool(
        scripted: str, harbor_server: tuple[str, str], tmp_path: Path, openenv_cli: Any) -> None:
    base_url, token = harbor_server
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    out = tmp_path / "run"
    proc = openenv_cli("agent-eval", "harbor", "--split", "train", "--base-url", base_url, "--token", token,
                       "--model-url", scripted, "--agent", f"{sys.executable} {agent}", "--tools", "act",
                       "--action-field", "", "--action-extra", '{"submit": true}', "-o", str(out), "--json",
                       timeout=300)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["episodes"] == 1 and summary["errors"] == 0, summary
    assert summary["per_task"] == {"fix-add": 1.0}  # graded in a fresh box: the agent's fix passes
    assert summary["model_calls"] == 1 and summary["samples"] == 1
    [record] = [json.loads(line) for line in (out / "rollouts.jsonl").read_text().splitlines()]
    assert record["reward"] == 1.0 and record["task_id"] == "fix-add"


def test_an_agent_that_does_nothing_scores_zero_and_a_refused_action_is_a_tool_error(
        scripted: str, harbor_server: tuple[str, str], tmp_path: Path) -> None:
    from openenv.client import GenericEnvClient
    from openenv_gateway import CaptureGateway
    from openenv_gateway.evaluate import ActTool, evaluate_split
    from openenv_gateway.harness import CommandHarness
    from openenv_rollouts.envinfo import fetch_schema

    base_url, token = harbor_server
    with CaptureGateway(scripted) as gateway:
        harness = CommandHarness(gateway, [sys.executable, "-c", "pass"], deadline_s=120, grade_reserve_s=30)
        result = evaluate_split(base_url, env="harbor", split="train", harness=harness, out_dir=tmp_path, token=token,
                                action_field="", action_extra={"submit": True}, tools="act")
    assert [e.episode.reward for e in result.episodes] == [0.0]
    with GenericEnvClient(base_url, token=token).sync() as client:
        client.reset(task_id="fix-add")
        act = ActTool(client, fetch_schema(base_url, token)["action"])
        listed = act({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})["result"]["tools"]
        assert [t["name"] for t in listed] == ["act"] and "command" in listed[0]["inputSchema"]["properties"]
        bad = act({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "act", "arguments": {
            "command": 7}}})
        assert bad["result"]["error"] and "command" in bad["result"]["error"]
        done = act({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "act", "arguments": {
            "submit": True}}})
        assert done["result"]["done"] is True
        over = act({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "act", "arguments": {}}})
        assert "episode is over" in over["error"]["message"]
