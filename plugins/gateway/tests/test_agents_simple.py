"""The shipped agent (``python -m openenv_gateway.agents.simple``) against the gateway in front of the
scripted upstream: its loop, what it leaves, and its exit codes."""

from __future__ import annotations

import sys
from pathlib import Path

from openenv_gateway import CaptureGateway
from openenv_gateway.agents.simple import extract_code, syntax_error
from openenv_gateway.harness import AgentRun, CommandHarness, Verdict

AGENT = [sys.executable, "-m", "openenv_gateway.agents.simple"]


def test_extract_code_takes_the_first_fence_or_the_whole_reply() -> None:
    assert extract_code("Sure:\n```python\ndef f():\n    return 1\n```\nDone.") == "def f():\n    return 1\n"
    assert extract_code("```\nx = 1\n```") == "x = 1\n"
    assert extract_code("```py\nx = 2") == "x = 2\n"  # cut off by max_tokens: up to the end
    assert extract_code("x = 3") == "x = 3\n"


def test_syntax_error_names_the_problem() -> None:
    assert syntax_error("x = 1\n", "s.py") is None
    problem = syntax_error("ok 3\n", "s.py")
    assert problem is not None and problem.startswith("SyntaxError")


def _keep(run: AgentRun) -> Verdict:
    return Verdict(reward=0.0, info={"solution": (run.workdir / "solution.py").read_text()})


def test_the_agent_retries_code_that_does_not_compile_then_stops(gateway: CaptureGateway) -> None:
    # the scripted model answers "ok <n>" (not Python): the agent feeds the error back, 3 turns
    harness = CommandHarness(gateway, AGENT, deadline_s=60, grade_reserve_s=5)  # _keep reads it before removal
    episode = harness.run(episode_id="simple-1", prompt="write f()", verdict=_keep)
    assert episode.error is None, episode.run and episode.run.stderr
    assert len(episode.trace.turns) == 3 and episode.verdict is not None
    assert episode.verdict.info["solution"] == "ok 6\n"  # system + user + 2 (assistant, user) pairs
    # the scripted engine's ids are the prompt's bytes: what the model was shown on the last turn
    shown = bytes(i for i in episode.trace.turns[-1].prompt_ids if i < 256).decode()
    assert "That does not compile (SyntaxError" in shown and [t.branch for t in episode.trace.turns] == [0, 0, 0]
    assert episode.run is not None and episode.run.stdout == "ok 6\n"


def test_the_agent_reports_a_refused_call_and_exits_1(gateway: CaptureGateway, tmp_path: Path) -> None:
    harness = CommandHarness(gateway, AGENT, deadline_s=60, grade_reserve_s=5, extra_env={"OPENAI_API_KEY": "forged"})
    episode = harness.run(episode_id="simple-2", prompt="write f()", verdict=lambda run: Verdict(reward=0.0))
    assert episode.error is not None and episode.error["kind"] == "agent" and episode.error["exit_code"] == 1
    assert "AuthenticationError" in episode.error["stderr_tail"] and not episode.trace.turns


def test_a_bad_setting_is_exit_2_with_its_name(gateway: CaptureGateway) -> None:
    harness = CommandHarness(gateway, AGENT, deadline_s=60, grade_reserve_s=5, extra_env={"OPENENV_AGENT_TURNS": "0"})
    episode = harness.run(episode_id="simple-3", prompt="x", verdict=lambda run: Verdict(reward=0.0))
    assert episode.error is not None and episode.error["exit_code"] == 2
    assert "OPENENV_AGENT_TURNS must be a positive integer" in episode.error["stderr_tail"]
