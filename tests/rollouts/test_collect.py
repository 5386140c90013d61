"""``collect``: concurrent episodes on a real local server, records, seeds, tasks, errors, restarts."""

from __future__ import annotations

import gc
import json
from pathlib import Path

import pytest

from openenv_rollouts import collect, read_records

COUNT = "count_env:CountEnv"
pytestmark = pytest.mark.usefixtures("no_leftover_processes")


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_grid_world_episodes_are_recorded_with_their_steps(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    thresholds = gc.get_threshold()
    summary = collect("grid_world", episodes=6, concurrency=3, seed=5, output=out, max_steps=15)
    # the run tunes CPython's collector for its duration only
    assert gc.get_threshold() == thresholds and gc.get_freeze_count() == 0
    records = _lines(out)
    assert summary.episodes == summary.ok == 6 and summary.errors == 0
    assert sorted(r["key"] for r in records) == [f"ep-{i:06d}" for i in range(6)]
    assert summary.steps == sum(r["num_steps"] for r in records) > 0
    for r in records:
        assert r["schema"] == "openenv.rollout/3" and r["seed"] == 5 + r["episode"]
        assert r["num_steps"] == len(r["steps"]) <= 15
        assert r["truncated"] == (not r["done"])
        for step in r["steps"]:
            assert step["action"]["move"] in step["observation"]["legal_actions"]
            assert set(step) == {"t", "observation", "action", "reward", "components", "done", "env_s", "policy_s",
                                 "llm"}
            assert step["llm"] is None
        assert r["reward"] == pytest.approx(sum(s["reward"] for s in r["steps"]))
    # seeded: the same run again plays the same actions
    again = tmp_path / "again.jsonl"
    collect("grid_world", episodes=6, concurrency=2, seed=5, output=again, max_steps=15)
    by_key = {r["key"]: [s["action"] for s in r["steps"]] for r in _lines(again)}
    assert by_key == {r["key"]: [s["action"] for s in r["steps"]] for r in records}


def test_tasks_components_and_a_callable_policy(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text('{"task": "alpha"}\n{"task": "beta"}\n')
    out = tmp_path / "r.jsonl"
    summary = collect(COUNT, episodes=4, concurrency=2, output=out, policy="policies_for_tests:two", tasks=tasks)
    records = {r["episode"]: r for r in _lines(out)}
    assert [records[i]["task"] for i in range(4)] == [{"task": "alpha"}, {"task": "beta"}] * 2
    assert records[1]["steps"][0]["observation"]["task"] == "beta"
    assert all(r["num_steps"] == 3 and r["done"] and not r["truncated"] for r in records.values())
    assert records[0]["reward"] == pytest.approx(2.0)
    assert records[0]["reward_components"] == pytest.approx({"size": 2.0, "bonus": 3.0})
    assert summary.component_means == pytest.approx({"bonus": 3.0, "size": 2.0})
    assert summary.mean_reward == pytest.approx(2.0) and summary.std_reward == 0.0
    async_run = collect(COUNT, episodes=2, output=tmp_path / "a.jsonl", policy="policies_for_tests:async_one")
    assert async_run.mean_reward == pytest.approx(1.0)


def test_bad_policy_is_recorded_and_the_run_goes_on(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    summary = collect(COUNT, episodes=5, concurrency=2, output=out, policy="policies_for_tests:flaky",
                      max_errors=2)
    records = {r["episode"]: r for r in _lines(out)}
    assert summary.episodes == 5 and summary.ok == 3 and summary.errors == 2 and not summary.budget_spent
    assert records[1]["status"] == "error" and records[1]["error"]["kind"] == "policy"
    assert "blew up on purpose" in records[1]["error"]["message"]
    invalid = records[2]["error"]
    assert invalid["kind"] == "invalid_action" and invalid["action"] == {"n": 99}
    assert invalid["errors"] and "n" in json.dumps(invalid["errors"])
    assert all(records[i]["status"] == "ok" and records[i]["num_steps"] == 3 for i in (0, 3, 4))


def test_actions_that_are_not_json_are_recorded_and_the_run_goes_on(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    summary = collect(COUNT, episodes=4, concurrency=1, output=out, policy="policies_for_tests:unsendable",
                      max_errors=2)
    records = {r["episode"]: r for r in _lines(out)}  # every line is JSON
    assert summary.episodes == 4 and summary.ok == 2 and summary.errors == 2
    assert records[1]["error"]["kind"] == "invalid_action"
    assert "cannot be sent as JSON" in records[1]["error"]["message"]
    assert records[1]["error"]["action"]["n"].startswith("<object object")  # kept, as text
    # an action that contains itself cannot be written either: the episode is kept without it
    assert records[2]["status"] == "error" and records[2]["steps"] == []
    assert "not representable as JSON" in records[2]["error"]["message"]
    assert all(records[i]["status"] == "ok" and records[i]["num_steps"] == 3 for i in (0, 3))


def test_a_dead_server_is_restarted_and_the_episode_retried(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "crashed-once"
    monkeypatch.setenv("COUNT_ENV_CRASH", str(marker))
    out = tmp_path / "r.jsonl"
    summary = collect(COUNT, episodes=4, concurrency=1, output=out, policy="policies_for_tests:two", retries=1)
    records = _lines(out)
    assert marker.exists() and summary.restarts == 1
    assert summary.ok == 4 and summary.errors == 0
    assert [r["attempts"] for r in sorted(records, key=lambda r: r["episode"])] == [2, 1, 1, 1]


def test_a_server_that_keeps_dying_spends_the_budget_and_keeps_what_was_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, openenv_cli, cli_env) -> None:
    out = tmp_path / "r.jsonl"
    env = {**cli_env, "COUNT_ENV_CRASH": "always",
           "PYTHONPATH": str(Path(__file__).parent)}
    proc = openenv_cli("collect", COUNT, "-n", "6", "-c", "1", "-o", str(out), "--policy",
                       "policies_for_tests:two", "--retries", "1", "--max-errors", "1", "-q", env=env, timeout=180)
    assert proc.returncode == 1, proc.stderr
    assert "error budget spent: 2 of 2 episodes failed (budget 1)" in proc.stderr
    records = list(read_records(out))
    assert len(records) == 2 and all(r["status"] == "error" and r["error"]["kind"] == "env" for r in records)
    assert all(r["attempts"] == 2 for r in records)
