"""``openenv rubrics rescore`` on the files ``openenv collect`` writes (``openenv.rollout/1``).

The files are real: the rollouts package's ``collect`` plays echo and grid_world on a local server.
A collect step's ``observation`` is the one seen *before* the action, so a correct re-score pairs
each action with the next step's observation (or ``final_observation``): re-scoring with the
rubric the server applied then reproduces the stored rewards exactly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from openenv.rubric import Rubric
from openenv_env_grid_world.oracle import solve
from openenv_rollouts import collect
from openenv_rollouts.policies import CallablePolicy
from openenv_rollouts.records import read_records
from openenv_rubrics import rubric_from_spec
from openenv_rubrics.rescore import RescoreError, rescore

# echo's own reward (length_score over action.message), read from the observation that followed.
ECHO_AFTER = "length_score=response=observation.echoed_message,scale=0.1,name=length"
# grid_world's own reward (fields_equal on position/goal: +1 at the goal, else -0.01).
GRID = 'fields_equal={"left": "observation.position", "right": "observation.goal", "on_differ": -0.01}'


@pytest.fixture(scope="module")
def echo_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("echo") / "echo.jsonl"
    summary = collect("echo", episodes=3, concurrency=1, seed=1, output=out, policy="random", max_steps=4)
    assert summary.ok == 3
    return out


@pytest.fixture(scope="module")
def grid_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("grid") / "grid.jsonl"
    oracle = CallablePolicy("oracle", lambda obs, ctx: solve(obs))
    summary = collect("grid_world", episodes=3, concurrency=1, seed=3, output=out, policy=oracle, max_steps=40)
    assert summary.ok == 3
    return out


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_rescoring_echo_with_its_own_reward_reproduces_the_stored_rewards(echo_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "rescored.jsonl"
    summary = rescore(echo_file, rubric_from_spec(ECHO_AFTER), out)
    before, after = _lines(echo_file), list(read_records(out))  # still openenv.rollout/1 records
    assert summary.episodes == 3 and summary.lines == 3 and summary.written == 12
    for old, new in zip(before, after, strict=True):
        assert new["key"] == old["key"] and new["rescored"]["rubric"] == "length"
        assert new["rescored"]["previous_reward"] == old["reward"]
        assert [s["reward"] for s in new["steps"]] == pytest.approx([s["reward"] for s in old["steps"]])
        assert [s["previous_reward"] for s in new["steps"]] == [s["reward"] for s in old["steps"]]
        assert [s["components"] for s in new["steps"]] == [{"length": s["reward"]} for s in new["steps"]]
        assert new["reward"] == pytest.approx(old["reward"])
        assert new["reward_components"] == {"length": pytest.approx(old["reward"])}
        # the observation each step was paired with is not the one the policy saw before acting
        assert old["steps"][0]["observation"]["echoed_message"] != old["steps"][0]["action"]["message"]


def test_a_grid_world_episode_pairs_its_goal_step_with_the_final_observation(grid_file: Path,
                                                                              tmp_path: Path) -> None:
    before = _lines(grid_file)
    assert all(r["done"] and r["steps"][-1]["reward"] == 1.0 for r in before)  # the oracle reached the goal
    rescore(grid_file, rubric_from_spec(GRID), tmp_path / "g.jsonl")
    for old, new in zip(before, _lines(tmp_path / "g.jsonl"), strict=True):
        assert [s["reward"] for s in new["steps"]] == pytest.approx([s["reward"] for s in old["steps"]])

    class Done(Rubric):  # what a server rubric reading observation.done would see
        def evaluate(self, action: Any, observation: Any) -> float:
            return 1.0 if observation["done"] else 0.0

    rescore(grid_file, Done(), tmp_path / "d.jsonl")
    for old, new in zip(before, _lines(tmp_path / "d.jsonl"), strict=True):
        assert [s["reward"] for s in new["steps"]] == [float(s["done"]) for s in old["steps"]]


def test_episode_level_rescoring_of_a_rollout_file(echo_file: Path, tmp_path: Path) -> None:
    spec = json.dumps({"rubric": ECHO_AFTER, "gamma": 0.5})
    summary = rescore(echo_file, rubric_from_spec(f"discounted_return={spec}"), tmp_path / "e.jsonl",
                      level="episode")
    rows, before = _lines(tmp_path / "e.jsonl"), _lines(echo_file)
    assert summary.written == 3 and [r["episode_id"] for r in rows] == [b["key"] for b in before]
    for row, old in zip(rows, before, strict=True):
        expected = sum(0.5**t * s["reward"] for t, s in enumerate(old["steps"]))
        assert row["steps"] == 4 and row["reward"] == pytest.approx(expected)
        assert row["previous_reward"] == old["reward"]


def test_a_failed_episode_without_steps_is_kept_or_skipped(echo_file: Path, tmp_path: Path) -> None:
    records = _lines(echo_file)
    failed = {**records[0], "key": "ep-000099", "status": "error", "steps": [], "num_steps": 0,
              "reward": 0.0, "final_observation": None, "error": {"kind": "env", "type": "X", "message": "x"}}
    src = tmp_path / "with-failed.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in [*records, failed]))
    rescore(src, rubric_from_spec(ECHO_AFTER), tmp_path / "s.jsonl")
    assert _lines(tmp_path / "s.jsonl")[-1]["steps"] == [] and _lines(tmp_path / "s.jsonl")[-1]["reward"] == 0.0
    summary = rescore(src, rubric_from_spec("discounted_return=reward_high=10"), tmp_path / "e.jsonl",
                      level="episode")
    assert summary.skipped == 1 and summary.written == 3


def test_bad_rollout_files_name_the_line(echo_file: Path, tmp_path: Path) -> None:
    rubric = rubric_from_spec(ECHO_AFTER)
    text = echo_file.read_text()
    torn = tmp_path / "torn.jsonl"
    torn.write_text(text + text.splitlines()[0][:40])
    with pytest.raises(RescoreError, match=r"torn.jsonl:4: not JSON.*collect --resume"):
        rescore(torn, rubric, tmp_path / "o.jsonl")
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text(text + json.dumps({"episode_id": "a", "step": 0, "action": {}, "observation": {}}) + "\n")
    with pytest.raises(RescoreError, match=r"mixed.jsonl:4: mixes openenv.rollout/1 records and step lines"):
        rescore(mixed, rubric, tmp_path / "o.jsonl")
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({**json.loads(text.splitlines()[0]), "schema": "openenv.rollout/9"}) + "\n")
    with pytest.raises(RescoreError, match=r"'openenv\.rollout/9' is not one this version reads"):
        rescore(other, rubric, tmp_path / "o.jsonl")
    with pytest.raises(RescoreError, match=r"echo.jsonl:1: episode 'ep-000000': rubric 'exact_match'"):
        rescore(echo_file, rubric_from_spec("exact_match=response=observation.nope,expected=x"), tmp_path / "o.jsonl")
    assert not (tmp_path / "o.jsonl").exists()


def test_the_cli_rescores_a_collect_file(grid_file: Path, tmp_path: Path) -> None:
    from openenv.cli.main import build_app

    out = tmp_path / "cli.jsonl"
    argv = ["rubrics", "rescore", str(grid_file), "--rubric", GRID, "-o", str(out), "--json"]
    result = CliRunner().invoke(build_app(argv), argv, env={"COLUMNS": "200", "NO_COLOR": "1"})
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["episodes"] == 3
    assert [r["reward"] for r in _lines(out)] == pytest.approx([r["reward"] for r in _lines(grid_file)])
