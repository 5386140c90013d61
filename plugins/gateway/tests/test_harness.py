"""The command harness with real agent processes (Python programs using the openai SDK) against the
gateway and the scripted upstream: the agent's environment, samples with the verdict's reward, and
the deadline, crashes and failing verdicts, each ending the episode with a structured error."""

from __future__ import annotations

import sys

import pytest

from openenv_gateway import CaptureGateway
from openenv_gateway.harness import AgentRun, CommandHarness, Verdict

pytest.importorskip("openai")

AGENT = """
import os, sys, openai
assert "OPENENV_TEST_SECRET" not in os.environ, "the caller's environment leaked into the agent"
client = openai.OpenAI()  # OPENAI_BASE_URL and OPENAI_API_KEY come from the harness
messages = [{"role": "user", "content": sys.stdin.read()}]
for _ in range(2):
    reply = client.chat.completions.create(model=os.environ["OPENENV_MODEL"], messages=messages)
    messages += [{"role": "assistant", "content": reply.choices[0].message.content},
                 {"role": "user", "content": "again"}]
print(reply.choices[0].message.content)
"""


def _length_verdict(run: AgentRun) -> Verdict:
    answer = run.stdout.strip()
    return Verdict(reward=float(answer == "ok 3"), components={"exact": float(answer == "ok 3")})


def test_an_agent_episode_becomes_samples_with_the_verdicts_reward(gateway: CaptureGateway,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENENV_TEST_SECRET", "must not reach the agent")
    harness = CommandHarness(gateway, [sys.executable, "-c", AGENT], deadline_s=60, grade_reserve_s=5, model="m")
    episode = harness.run(episode_id="e1", prompt="say ok", task_id="t1", group_id="g1", verdict=_length_verdict)
    assert episode.error is None, episode.run and episode.run.stderr
    assert episode.run is not None and episode.run.stdout.strip() == "ok 3"
    assert episode.reward == 1.0 and [t.branch for t in episode.trace.turns] == [0, 0]
    (sample,) = episode.samples
    assert sample.reward == 1.0 and sample.task_id == "t1" and sample.group_id == "g1"
    assert sample.input_ids == episode.trace.turns[1].full_ids and sample.num_completion_tokens == 2 * 5
    fields = episode.record_fields()
    assert fields["status"] == "ok" and fields["samples"][0]["loss_mask"] == sample.loss_mask


def test_the_deadline_kills_a_hanging_agent_and_still_grades(gateway: CaptureGateway) -> None:
    hang = "import time\nprint('partial', flush=True)\ntime.sleep(60)"
    harness = CommandHarness(gateway, [sys.executable, "-c", hang], deadline_s=3, grade_reserve_s=1)
    seen: list[str] = []
    episode = harness.run(episode_id="e2", prompt="x",
                          verdict=lambda run: seen.append(run.stdout) or Verdict(reward=0.0))
    assert episode.error is not None and episode.error["kind"] == "deadline" and episode.error["phase"] == "agent"
    assert episode.run is not None and episode.run.timed_out and seen == ["partial\n"]
    assert episode.reward == 0.0 and episode.samples == []


def test_a_crashed_agent_and_a_failing_or_hanging_env_are_recorded(gateway: CaptureGateway) -> None:
    crash = CommandHarness(gateway, [sys.executable, "-c", "import sys; sys.exit(3)"], deadline_s=30,
                           grade_reserve_s=2)
    crashed = crash.run(episode_id="e3", prompt="x", verdict=lambda run: Verdict(reward=-1.0))
    assert crashed.error is not None and crashed.error["kind"] == "agent" and crashed.error["exit_code"] == 3
    assert crashed.reward == -1.0  # the env still judged what the agent left

    def broken(run: AgentRun) -> Verdict:
        raise ConnectionError("env server went away")

    failed = crash.run(episode_id="e4", prompt="x", verdict=broken)
    assert failed.error == {"kind": "env", "type": "ConnectionError", "message": "env server went away"}
    slow = CommandHarness(gateway, [sys.executable, "-c", "pass"], deadline_s=2, grade_reserve_s=1)
    import threading

    release = threading.Event()
    hung = slow.run(episode_id="e5", prompt="x", verdict=lambda run: release.wait(30) and Verdict(reward=1.0))
    release.set()
    assert hung.error is not None and hung.error["phase"] == "verdict" and hung.verdict is None


PROBE = """
import os, socket, openai
port = int(os.environ["OPENENV_PROBE_PORT"])
s = socket.socket()
s.settimeout(3)
outside = s.connect_ex(("127.0.0.1", port))  # the host's loopback service, outside the namespace
reply = openai.OpenAI(max_retries=0).chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
print(outside, reply.choices[0].message.content)
"""


def test_gateway_only_network_reaches_the_gateway_and_nothing_else(gateway: CaptureGateway) -> None:
    import os
    import shutil
    import socket

    if shutil.which("bwrap") is None:
        if os.environ.get("OPENENV_REQUIRE_BWRAP") == "1":
            pytest.fail("bubblewrap is not installed but OPENENV_REQUIRE_BWRAP=1 (.ci/bwrap-setup.sh installs it)")
        pytest.skip("network='gateway-only' needs bubblewrap")
    host_service = socket.socket()
    host_service.bind(("127.0.0.1", 0))
    host_service.listen(1)
    try:
        harness = CommandHarness(gateway, [sys.executable, "-c", PROBE], deadline_s=60, grade_reserve_s=5,
                                 network="gateway-only",
                                 extra_env={"OPENENV_PROBE_PORT": str(host_service.getsockname()[1])})
        episode = harness.run(episode_id="net", prompt="x", verdict=lambda run: Verdict(reward=0.0))
    finally:
        host_service.close()
    assert episode.error is None, episode.run and episode.run.stderr
    assert episode.run is not None
    refused, answer = episode.run.stdout.split(maxsplit=1)
    assert int(refused) != 0 and answer.strip() == "ok 1"  # the host's service unreachable, the gateway served
    assert len(episode.trace.turns) == 1 and episode.trace.turns[0].error is None
