"""``openenv eval`` end to end on a real served env with tasks (``target_env``), and collect's
``--split``/``--group-size`` on it: pass@k, reports, resume after kill -9, clear errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from openenv_rollouts import collect, read_records
from openenv_rollouts.eval import evaluate

TARGET = "target_env:TargetEnv"
pytestmark = pytest.mark.usefixtures("no_leftover_processes")


def test_eval_plays_every_task_k_times_and_reports(tmp_path: Path) -> None:
    run = evaluate(TARGET, split="test", k=3, out_dir=tmp_path / "run", policy="policies_for_tests:one",
                   concurrency=3)
    res = run.result
    assert res.episodes == 18 and res.errors == 0 and sorted(res.tasks) == [f"test-{i}" for i in range(6)]
    # target i % 4 == 1 for test-1 and test-5: always solved; the others never
    assert [t for t, r in res.tasks.items() if r.solved] == ["test-1", "test-5"]
    assert res.success_rate == pytest.approx(1 / 3) and res.pass_at == pytest.approx({1: 1 / 3, 2: 1 / 3, 3: 1 / 3})
    assert res.component_means == pytest.approx({"hit": 1 / 3})
    records = list(read_records(tmp_path / "run" / "rollouts.jsonl"))
    assert sorted(r["key"] for r in records) == sorted(f"test-{i}#{s}" for i in range(6) for s in range(3))
    assert all(r["task_id"] == r["key"].split("#")[0] and r["split"] == "test" for r in records)
    doc = json.loads((tmp_path / "run" / "eval.json").read_text())
    assert doc["pass_at_k"] == {"1": pytest.approx(1 / 3), "2": pytest.approx(1 / 3), "3": pytest.approx(1 / 3)}
    assert (tmp_path / "run" / "index.html").exists() and (tmp_path / "run" / "tasks.csv").exists()


def test_collect_groups_on_server_tasks_share_task_and_group(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    summary = collect(TARGET, episodes=12, concurrency=4, seed=3, output=out, policy="random", split="train",
                      group_size=4, sampler="signal")
    assert summary.ok == 12
    groups: dict[str, list[dict]] = {}
    for r in read_records(out):
        groups.setdefault(r["group_id"], []).append(r)
    assert len(groups) == 3 and all(len(g) == 4 for g in groups.values())
    for members in groups.values():
        assert len({m["task_id"] for m in members}) == 1 and members[0]["task_id"].startswith("train-")
        # the server saw the group: the reset observation of every member names it
        assert {m["steps"][0]["observation"]["metadata"]["group_id"] for m in members} == {members[0]["group_id"]}
    state = json.loads((tmp_path / "r.jsonl.sampler.json").read_text())
    assert state["kind"] == "signal" and sum(state["groups"]) == 3


def test_eval_resumes_after_kill_9_without_replaying_a_finished_pair(tmp_path: Path, cli_env, wait_until) -> None:
    out = tmp_path / "run"
    rollouts = out / "rollouts.jsonl"
    env = {**cli_env, "PYTHONPATH": str(Path(__file__).parent)}
    args = [sys.executable, "-m", "openenv", "eval", TARGET, "--split", "test", "-k", "10", "-c", "1", "-o",
            str(out), "--policy", "policies_for_tests:slow_one", "-q", "--no-report"]
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        assert wait_until(lambda: rollouts.exists() and rollouts.read_text().count("\n") >= 3, timeout_s=60)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the env server child of the killed CLI
        except OSError:
            pass
    first = [json.loads(line) for line in rollouts.read_text().splitlines()]
    assert 3 <= len(first) < 60
    resumed = subprocess.run([*args, "--resume"], env=env, capture_output=True, text=True, timeout=180)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resumed: {len(first)} (task, sample) pairs" in resumed.stdout and "pass@10" in resumed.stdout
    records = list(read_records(rollouts))
    keys = [r["key"] for r in records]
    assert sorted(keys) == sorted(f"test-{i}#{s}" for i in range(6) for s in range(10))  # each once
    assert records[:len(first)] == first  # nothing written before the kill was lost or rewritten


def test_eval_errors_name_the_fix(tmp_path: Path, openenv_cli) -> None:
    typo = openenv_cli("eval", TARGET, "--split", "tset", "-o", str(tmp_path / "a"))
    assert typo.returncode == 2 and "no split 'tset'" in typo.stderr and "Did you mean 'test'" in typo.stderr
    no_tasks = openenv_cli("eval", "count_env:CountEnv", "-o", str(tmp_path / "b"))
    assert no_tasks.returncode == 2 and "declares no tasks" in no_tasks.stderr


def test_collect_weighted_sampler_from_a_weights_file(tmp_path: Path, openenv_cli) -> None:
    weights = tmp_path / "w.json"
    # ids not named weigh 1: name every train task, all but one at 0
    weights.write_text(json.dumps({f"train-{i}": float(i == 2) for i in range(8)}))
    out = tmp_path / "r.jsonl"
    done = openenv_cli("collect", TARGET, "-n", "4", "-c", "2", "--split", "train", "--sampler", "weighted",
                       "--task-weights", str(weights), "-o", str(out), "--quiet")
    assert done.returncode == 0, done.stderr
    assert {r["task_id"] for r in read_records(out)} == {"train-2"}
    weights.write_text("[1, 2]")
    bad = openenv_cli("collect", TARGET, "-n", "1", "--split", "train", "--sampler", "weighted",
                      "--task-weights", str(weights), "-o", str(tmp_path / "b.jsonl"))
    assert bad.returncode == 2 and "expected a JSON object of task id" in bad.stderr
