"""mini-swe-agent (from the package index, unmodified) as a black-box agent on a coding-env task:
mini-swe-agent → litellm → the gateway → the tiny real model; the env's verdict → samples in an
``openenv.rollout/3`` record. A random model solves nothing (reward 0); the point is that each of
mini-swe-agent's model calls is captured with the engine's own ids, and that it reaches nothing
but the gateway (a recording proxy stands in for the rest of the network)."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

pytestmark = pytest.mark.slow_ok("mini-swe-agent imports litellm and makes up to 3 calls to a real (tiny) model")


class RecordingProxy:
    """An HTTP(S) proxy on 127.0.0.1 that forwards nothing: it records each request line and answers 403,
    so an agent given it as ``HTTPS_PROXY`` shows every address it tried to reach beyond the gateway."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.2)
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True, name="recording-proxy")
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5)
                try:
                    line = conn.recv(4096).split(b"\r\n", 1)[0].decode(errors="replace")
                    self.requests.append(line)
                    conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                except OSError:
                    continue

    def env(self) -> dict[str, str]:
        return {name: self.url for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                                            "all_proxy")}

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._sock.close()


@pytest.fixture
def proxy() -> Iterator[RecordingProxy]:
    recorder = RecordingProxy()
    yield recorder
    recorder.close()


@pytest.fixture(scope="module")
def coding_server() -> Iterator[tuple[str, str]]:
    """The coding env served by the local provider: (base URL, token)."""
    from openenv.interfaces import LaunchSpec
    from openenv.plugins import get_plugin_manager

    pm = get_plugin_manager()
    provider = pm.catalog.providers.load(pm.choose_provider("coding", None))()
    token = secrets.token_urlsafe(16)
    handle = provider.start(LaunchSpec(env="coding", max_sessions=4, token=token))
    yield handle.base_url, token
    handle.stop()


def test_the_proxy_sees_litellm_reach_out_when_not_told_to_stay_offline(proxy: RecordingProxy) -> None:
    """The check below can fail: without the launcher's settings, importing litellm (as mini-swe-agent
    does) tries to download its model-cost map, and the recording proxy sees it."""
    pytest.importorskip("minisweagent")
    env = {"PATH": "/usr/bin:/bin", "NO_PROXY": "127.0.0.1", **proxy.env()}
    subprocess.run([sys.executable, "-c", "import litellm"], env=env, capture_output=True, timeout=180, check=True)
    assert any("raw.githubusercontent.com" in line for line in proxy.requests), proxy.requests


def test_mini_swe_agent_on_a_coding_task_through_the_gateway(model_url: str, coding_server: tuple[str, str],
                                                             proxy: RecordingProxy, tmp_path: Path,
                                                             request: pytest.FixtureRequest) -> None:
    pytest.importorskip("minisweagent")
    from minisweagent.models.utils.actions_toolcall import BASH_TOOL

    from openenv_gateway import CaptureGateway
    from openenv_gateway.agents.miniswe import TRAJECTORY, preset_command
    from openenv_gateway.evaluate import evaluate_split
    from openenv_gateway.harness import CommandHarness
    from openenv_rollouts import read_records

    base_url, token = coding_server
    gateway = CaptureGateway(model_url)
    gateway.start()
    try:
        # the harness's deadline covers env reset, mini-swe-agent's run and grading
        harness = CommandHarness(gateway, preset_command(["mini-swe-agent", "--step-limit", "3"]) or [],
                                 deadline_s=240, grade_reserve_s=30, extra_env=proxy.env(), keep_workdir=True)
        result = evaluate_split(base_url, env="coding", split="test", harness=harness, out_dir=tmp_path, token=token,
                                limit=1, action_extra={"submit": True})
    finally:
        gateway.stop()
    [played] = result.episodes
    episode = played.episode
    assert episode.run is not None
    workdir = episode.run.workdir
    request.addfinalizer(lambda: shutil.rmtree(workdir, ignore_errors=True))  # kept (keep_workdir) to read
    assert episode.error is None, (episode.error, episode.run.stdout[-3000:], episode.run.stderr[-3000:])
    # the env graded it (its hidden tests ran) and a random model solves nothing
    assert episode.reward == 0.0 and episode.verdict is not None
    assert episode.verdict.info["observation"]["tests_total"] > 0

    # mini-swe-agent's own account of the run: the task reached it, it called the model 3 times
    traj = json.loads((workdir / TRAJECTORY).read_text())
    assert traj["info"]["model_stats"]["api_calls"] == 3
    assert traj["info"]["exit_status"] in ("LimitsExceeded", "RepeatedFormatError")
    messages = traj["messages"]
    task_prompt = messages[1]["content"]
    assert played.task_id and "solution.py" in task_prompt
    # the model's raw responses (a reply without a tool call is kept on the format-error message)
    replies = [m["extra"]["response"]["choices"][0]["message"] for m in messages if "response" in m.get("extra", {})]
    assert len(replies) == 3

    # every call captured with the engine's ids and logprobs, and what mini-swe-agent got is what was captured
    turns = episode.trace.turns
    assert len(turns) == 3 and all(t.error is None and t.ids_source == "engine" for t in turns)
    for turn, reply in zip(turns, replies, strict=True):
        assert turn.completion_ids and len(turn.logprobs) == len(turn.completion_ids)
        assert turn.text == (reply["content"] or "")
    # the engine, asked directly for mini-swe-agent's first request, gives the captured ids
    direct = httpx.post(model_url + "/v1/chat/completions", timeout=120, json={
        "model": "m", "messages": [{"role": m["role"], "content": m["content"]} for m in messages[:2]],
        "tools": [BASH_TOOL], "return_token_ids": True}).json()
    assert turns[0].prompt_ids == direct["prompt_token_ids"]
    assert turns[0].completion_ids == direct["choices"][0]["token_ids"]

    # nothing but the gateway: the proxy every other address would have gone through saw no request
    assert proxy.requests == []

    # the turns became samples, with the env's reward, in the openenv.rollout/3 record
    [record] = list(read_records(tmp_path / "rollouts.jsonl"))
    assert record["schema"] == "openenv.rollout/3" and record["status"] == "ok" and record["reward"] == 0.0
    assert record["samples"] and len(record["samples"]) == len(episode.samples)
    covered: list[int] = []
    for sample in record["samples"]:
        assert sample["reward"] == 0.0 and sample["task_id"] == played.task_id
        assert sum(sample["loss_mask"]) > 0 and len(sample["logprobs"]) == len(sample["input_ids"])
        covered += sample["turns"]
    assert sorted(covered) == [0, 1, 2]  # each model call is in exactly one sample (a branch per re-render)


@pytest.mark.bwrap
def test_the_cli_preset_runs_mini_swe_agent_with_the_gateway_as_its_only_address(tmp_path: Path) -> None:
    """``openenv agent-eval coding --agent 'mini-swe-agent --step-limit 4' --network gateway-only``: the
    scripted upstream's ``tool`` model makes mini-swe-agent run a bash command each turn (``ok``: not
    found), under bubblewrap with no network but the gateway; the env grades what it left."""
    pytest.importorskip("minisweagent")
    if shutil.which("bwrap") is None:
        if os.environ.get("OPENENV_REQUIRE_BWRAP") == "1":
            pytest.fail("bubblewrap is not installed but OPENENV_REQUIRE_BWRAP=1 (.ci/bwrap-setup.sh installs it)")
        pytest.skip("--network gateway-only runs the agent under bubblewrap, which is not installed")
    from typer.testing import CliRunner

    from openenv.cli.main import build_app
    from openenv_gateway.testing.process import ServerProcess
    from openenv_rollouts import read_records

    with ServerProcess([sys.executable, "-m", "openenv_gateway.testing.scripted", "--port", "0"]) as upstream:
        argv = ["agent-eval", "coding", "--split", "test", "--model-url", upstream.base_url + "/v1", "--limit", "1",
                "--agent", "mini-swe-agent --step-limit 4", "--model", "tool", "--network", "gateway-only",
                "-o", str(tmp_path), "--deadline-s", "180", "--json"]
        result = CliRunner().invoke(build_app(argv), argv)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)  # stderr (log lines) is kept apart
    assert doc["episodes"] == 1 and doc["errors"] == 0 and doc["mean_reward"] == 0.0
    assert doc["model_calls"] == 4  # the step limit, counted by the gateway
    [record] = list(read_records(tmp_path / "rollouts.jsonl"))
    assert record["policy"].endswith("openenv_gateway.agents.miniswe --step-limit 4 --answer-file solution.py")
    assert record["final_observation"]["tests_total"] > 0 and record["samples"]
    assert all(s["reward"] == 0.0 and s["task_id"] == record["task_id"] for s in record["samples"])
    # the bash tool ran, in the sandbox: later turns carry its result (the scripted ids are the text's bytes)
    seen = b"".join(bytes(i for i in s["input_ids"] if i < 256) for s in record["samples"]).decode(errors="replace")
    assert "ok: not found" in seen and "<returncode>127</returncode>" in seen
