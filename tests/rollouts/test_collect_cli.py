"""``openenv collect`` as a user runs it: kill -9 mid-run, --resume, Parquet for datasets, report, LLM."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from openenv_rollouts import collect

COUNT = "count_env:CountEnv"
pytestmark = pytest.mark.usefixtures("no_leftover_processes")


def test_kill_9_leaves_valid_jsonl_and_resume_completes_without_duplicates(tmp_path: Path, cli_env,
                                                                          wait_until) -> None:
    out = tmp_path / "r.jsonl"
    env = {**cli_env, "PYTHONPATH": str(Path(__file__).parent)}
    args = [sys.executable, "-m", "openenv", "collect", COUNT, "-n", "40", "-c", "2", "-o", str(out),
            "--policy", "policies_for_tests:slow", "-q"]
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        assert wait_until(lambda: out.exists() and out.read_text().count("\n") >= 3, timeout_s=60)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        # the env server child of the killed CLI: stop it by its group (the CLI's session)
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
    text = out.read_text()
    lines = text.splitlines()
    assert text.endswith("\n") and 3 <= len(lines) < 40
    first = [json.loads(line) for line in lines]  # every line is a whole record
    assert len({r["key"] for r in first}) == len(first)
    resumed = subprocess.run([*args, "--resume"], env=env, capture_output=True, text=True, timeout=180)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resumed: {len(first)} episodes were already in" in resumed.stdout
    keys = [json.loads(line)["key"] for line in out.read_text().splitlines()]
    assert sorted(keys) == [f"ep-{i:06d}" for i in range(40)]  # all of them, each once
    again = subprocess.run([*args[:-1], "-q"], env=env, capture_output=True, text=True, timeout=60)
    assert again.returncode == 2 and "pass --resume" in again.stderr


def test_parquet_loads_with_datasets_and_the_report_has_charts(tmp_path: Path, openenv_cli) -> None:
    datasets = pytest.importorskip("datasets", reason="install openenvkit-rollouts[hf] to test datasets loading")
    out, pq, report = tmp_path / "r.jsonl", tmp_path / "r.parquet", tmp_path / "report"
    proc = openenv_cli("collect", "grid_world", "-n", "12", "-c", "4", "--seed", "1", "-o", str(out),
                       "--parquet", str(pq), "--report", str(report), "--max-steps", "20")
    assert proc.returncode == 0, proc.stderr
    assert "Mean reward" in proc.stdout and "Steps/s" in proc.stdout
    ds = datasets.load_dataset("parquet", data_files=str(pq), split="train",
                               cache_dir=str(tmp_path / "hf-cache"))
    records = {json.loads(line)["key"]: json.loads(line) for line in out.read_text().splitlines()}
    assert len(ds) == 12
    row = ds[0]
    source = records[row["key"]]
    assert row["reward"] == pytest.approx(source["reward"]) and row["num_steps"] == len(row["steps"])
    assert json.loads(row["steps"][0]["action"]) == source["steps"][0]["action"]
    for name in ("reward_hist.png", "reward_per_episode.png", "episode_length.png"):
        assert (report / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f'src="{name}"' in (report / "index.html").read_text()


def _tool_call_reply(body: dict, n: int):
    from openenv_rubrics.testing import Reply

    message = {"role": "assistant", "content": None, "tool_calls": [{
        "id": f"call-{n}", "type": "function",
        "function": {"name": "echo_with_length", "arguments": json.dumps({"message": f"hi{n}"})}}]}
    return Reply(body=json.dumps({"id": "x", "object": "chat.completion", "created": int(time.time()),
                                  "model": body.get("model"),
                                  "choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}]}))


def test_llm_policy_uses_tool_calls_for_an_mcp_env(tmp_path: Path) -> None:
    from openenv_rubrics.testing import FakeChatServer

    out = tmp_path / "r.jsonl"
    with FakeChatServer(_tool_call_reply) as chat:
        summary = collect("echo_mcp", episodes=2, concurrency=2, output=out, policy="llm", max_steps=2,
                          llm={"base_url": chat.url, "model": "tiny"})
        requests = list(chat.requests)
    assert summary.ok == 2 and summary.steps == 4
    tools = {t["function"]["name"] for t in requests[0]["tools"]}
    assert tools == {"echo_message", "echo_with_length"}
    step = json.loads(out.read_text().splitlines()[0])["steps"][0]
    assert step["action"]["type"] == "call_tool" and step["action"]["tool_name"] == "echo_with_length"
    second_turns = [r for r in requests if any(m["role"] == "tool" for m in r["messages"])]
    assert second_turns and '"length"' in second_turns[0]["messages"][-1]["content"]


def test_llm_policy_json_actions_and_garbage_answers(tmp_path: Path) -> None:
    from openenv_rubrics.testing import FakeChatServer, Reply

    def reply(body: dict, n: int) -> Reply:
        return Reply("sure! ```json\n{\"n\": 3}\n```") if "alpha" in json.dumps(body) else Reply("I refuse")

    tasks = [{"task": "alpha"}, {"task": "beta"}]
    out = tmp_path / "r.jsonl"
    with FakeChatServer(reply) as chat:
        summary = collect(COUNT, episodes=2, output=out, policy="llm", tasks=tasks, max_errors=1,
                          llm={"base_url": chat.url, "model": "tiny"})
        system = chat.requests[0]["messages"][0]["content"]
    records = {r["episode"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert '"n"' in system and "JSON schema" in system
    assert records[0]["status"] == "ok" and records[0]["reward"] == pytest.approx(3.0)
    assert records[1]["error"]["kind"] == "policy" and "I refuse" in records[1]["error"]["message"]
    assert summary.errors == 1 and not summary.budget_spent
