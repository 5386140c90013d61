"""``openenv run``: real providers, real servers, real episodes; and it always cleans up."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from openenv.cli.run_cmd import ActionSampler, Policy
from openenv.testing import restore_default_signals
from openenv.types import Action
from openenv_provider_local.process import group_members

pytestmark = pytest.mark.usefixtures("no_leftover_processes")


def transcript(stdout: str) -> list[str]:
    """The per-step lines (the summary table's steps/s varies from run to run)."""
    return [line for line in stdout.splitlines() if line.startswith(("episode", "  step"))]


def test_run_echo_two_episodes(openenv_cli, server_records) -> None:  # type: ignore[no-untyped-def]
    out = openenv_cli("run", "echo", "--episodes", "2", "--max-steps", "3")
    assert out.returncode == 0, out.stderr
    lines = transcript(out.stdout)
    assert lines[0] == 'episode 1  reset  obs {"echoed_message":"ready","message_length":0}'
    steps = [line for line in lines if line.startswith("  step")]
    assert len(steps) == 6
    for line in steps:  # the echo's reward is 0.1 per character of the sampled message
        message = json.loads(line.split("action ", 1)[1].split("  reward")[0])["message"]
        reward = float(line.split("reward ", 1)[1].split()[0])
        assert reward == pytest.approx(0.1 * len(message))
        assert f'"echoed_message":"{message}"' in line
    assert "episode 2  step limit after 3 steps" in out.stdout
    assert "Episodes" in out.stdout and "Mean return" in out.stdout and "Steps/s" in out.stdout
    assert server_records() == []


def test_run_grid_world_is_deterministic_with_a_seed(openenv_cli) -> None:  # type: ignore[no-untyped-def]
    first = openenv_cli("run", "grid_world", "--episodes", "3", "--seed", "1")
    second = openenv_cli("run", "grid_world", "--episodes", "3", "--seed", "1")
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert transcript(first.stdout) == transcript(second.stdout)
    assert len(transcript(first.stdout)) > 6
    # Replaying the transcript's actions on a local env gives the same positions, and every
    # action was legal where it was taken.
    from openenv_env_grid_world import GridAction, GridWorldEnv

    env, obs = GridWorldEnv(), None
    for line in transcript(first.stdout):
        if line.startswith("episode") and "reset" in line:
            obs = env.reset(seed=int(line.split()[1]))  # seed 1 + episode - 1
        elif line.startswith("  step"):
            assert obs is not None
            move = json.loads(line.split("action ", 1)[1].split("  reward")[0])["move"]
            assert move in obs.legal_actions, line
            obs = env.step(GridAction(move=move))
            assert f'"position":{json.dumps(obs.position, separators=(",", ":"))}' in line
            assert f"reward {obs.reward:g}" in line
    other = openenv_cli("run", "grid_world", "--episodes", "3", "--seed", "2")
    assert transcript(other.stdout) != transcript(first.stdout)


def test_json_summary(openenv_cli) -> None:  # type: ignore[no-untyped-def]
    out = openenv_cli("run", "grid_world", "--episodes", "3", "--seed", "1", "--json",
                      "--policy", "cycle")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)  # nothing but the JSON on stdout
    assert doc["schema"] == "openenv.run/1" and doc["env"] == "grid_world"
    assert (doc["provider"], doc["policy"], doc["seed"], doc["episodes"]) == ("local", "cycle", 1, 3)
    episodes = doc["per_episode"]
    assert [e["episode"] for e in episodes] == [1, 2, 3]
    assert doc["steps"] == sum(e["steps"] for e in episodes)
    assert doc["total_return"] == pytest.approx(sum(e["return"] for e in episodes), abs=1e-5)
    assert doc["mean_return"] == pytest.approx(doc["total_return"] / 3, abs=1e-5)
    for e in episodes:  # the grid world ends every episode: at the goal or after 50 steps
        assert e["done"] and (e["truncated"] == (e["steps"] == 50 and e["return"] < 0))
    again = json.loads(openenv_cli("run", "grid_world", "--episodes", "3", "--seed", "1",
                                   "--json", "--policy", "cycle").stdout)
    assert again["per_episode"] == episodes


@pytest.mark.parametrize("quiet", [True, False])
def test_many_episodes_show_no_transcript(openenv_cli, quiet: bool) -> None:  # type: ignore[no-untyped-def]
    # Past 20 episodes a progress bar (on stderr) replaces the transcript; --quiet has neither.
    out = openenv_cli("run", "echo", "--episodes", "25", "--max-steps", "2",
                      *(["--quiet"] if quiet else []))
    assert out.returncode == 0, out.stderr
    assert transcript(out.stdout) == []
    row = next(line for line in out.stdout.splitlines() if line.startswith("25 "))
    assert row.split()[:2] == ["25", "50"]  # episodes and steps in the summary


def test_unknown_env_and_provider_suggest_names(openenv_cli, server_records) -> None:  # type: ignore[no-untyped-def]
    out = openenv_cli("run", "grid_wrld")
    assert out.returncode == 2 and "Unknown env 'grid_wrld'. Did you mean 'grid_world'?" in out.stderr
    out = openenv_cli("run", "echo", "--provider", "lokal")
    assert out.returncode == 2 and "Unknown provider 'lokal'. Did you mean 'local'?" in out.stderr
    assert "Traceback" not in out.stderr
    assert server_records() == []


@pytest.fixture
def long_run(cli_env: dict[str, str], tmp_path: Path, wait_until, server_records):  # type: ignore[no-untyped-def]
    """``long_run()``: ``openenv run echo`` with an endless episode, returned once steps flow,
    with its stderr path and its server's record."""
    procs: list[subprocess.Popen[bytes]] = []

    def start() -> tuple[subprocess.Popen[bytes], Path, dict]:
        out, err = tmp_path / "run.out", tmp_path / "run.err"
        proc = subprocess.Popen(
            [sys.executable, "-m", "openenv", "run", "echo", "--max-steps", "10000000"],
            stdout=open(out, "wb"), stderr=open(err, "wb"), env=cli_env,  # noqa: SIM115
            preexec_fn=restore_default_signals,
        )
        procs.append(proc)
        record = wait_until(lambda: (server_records() or [None])[0], timeout_s=60)
        stepping = wait_until(lambda: out.exists() and b"step  10" in out.read_bytes(), timeout_s=60)
        if not (record and stepping):
            pytest.fail(f"run did not start stepping: {err.read_text()}")
        return proc, err, record

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_ctrl_c_stops_the_server_and_exits_130(long_run, server_records) -> None:  # type: ignore[no-untyped-def]
    proc, err, record = long_run()
    assert group_members(record["pgid"])
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=60) == 130
    assert "interrupted" in err.read_text()
    assert not group_members(record["pgid"])
    assert server_records() == []


def test_sigterm_also_cleans_up(long_run) -> None:  # type: ignore[no-untyped-def]
    proc, _, record = long_run()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 143
    assert not group_members(record["pgid"])


def test_server_killed_mid_episode_is_a_clear_error(long_run, server_records) -> None:  # type: ignore[no-untyped-def]
    proc, err, record = long_run()
    os.killpg(record["pgid"], signal.SIGKILL)
    assert proc.wait(timeout=60) == 1
    message = err.read_text()
    assert "error: lost the connection to the env server" in message
    assert "The server was killed by signal 9" in message
    assert "Traceback" not in message
    assert not group_members(record["pgid"])
    assert server_records() == []


# -- the action sampler (in process) ----------------------------------------------------------------


class Inner(BaseModel):
    level: int = Field(ge=2, le=4)
    tags: list[Literal["a", "b"]] = Field(min_length=2)


class RichAction(Action):
    command: Literal["go", "stop", "wait"]
    name: str = Field(min_length=12, max_length=20)
    count: int = Field(gt=5, lt=9)
    ratio: float = Field(ge=-1.0, le=1.0)
    flag: bool
    inner: Inner
    maybe: int | None
    optional_text: str = "default"


@pytest.mark.parametrize("policy", ["random", "first", "cycle"])
def test_sampled_actions_validate_against_the_model(policy: str) -> None:
    sampler = Policy(policy, RichAction.model_json_schema(), seed=3)
    for _ in range(50):
        action = sampler.act({})
        RichAction.model_validate(action)  # raises if the sampler broke a constraint
        assert "metadata" not in action and "optional_text" not in action


def test_first_and_cycle_policies_over_legal_actions() -> None:
    schema = {"properties": {"move": {"enum": ["up", "down"]}, "metadata": {}}, "required": ["move"]}
    obs = {"legal_actions": ["left", "right", "down"]}
    first = Policy("first", schema, seed=None)
    assert [first.act(obs) for _ in range(3)] == [{"move": "left"}] * 3
    cycle = Policy("cycle", schema, seed=None)
    assert [cycle.act(obs)["move"] for _ in range(4)] == ["left", "right", "down", "left"]
    seeded = [Policy("random", schema, seed=7).act(obs) for _ in range(2)]
    assert seeded[0] == seeded[1]
    assert first.act({"legal_actions": []}) == {"move": "up"}  # none listed: sample the schema


def test_sampler_follows_refs_and_is_bounded_on_recursive_schemas() -> None:
    schema = {
        "$defs": {"Node": {"type": "object", "properties": {"child": {"$ref": "#/$defs/Node"}},
                           "required": ["child"]}},
        "properties": {"root": {"$ref": "#/$defs/Node"}}, "required": ["root"],
    }
    value = ActionSampler(schema, lambda options: options[0]).sample()
    depth = 0
    while isinstance(value, dict) and value:
        value = next(iter(value.values()))
        depth += 1
    assert 1 < depth < 20


def test_sampler_handles_discriminated_unions() -> None:
    from pydantic import TypeAdapter

    class ListTools(Action):
        type: Literal["list_tools"] = "list_tools"

    class CallTool(Action):
        type: Literal["call_tool"] = "call_tool"
        tool_name: str
        arguments: dict[str, int] = Field(default_factory=dict)

    adapter = TypeAdapter(ListTools | CallTool)
    schema = adapter.json_schema()
    kinds = set()
    for seed in range(20):
        action = Policy("random", schema, seed=seed).act({})
        kinds.add(action["type"])  # the discriminator is always sent
        assert "metadata" not in action
        adapter.validate_python(action)
    assert kinds == {"list_tools", "call_tool"}
