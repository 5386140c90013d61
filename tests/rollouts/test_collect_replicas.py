"""``collect(..., replicas=N)``: episodes spread over N local servers behind an ``EnvPool``; a replica
that dies mid-run loses only attempts (retried on the others)."""

from __future__ import annotations

from pathlib import Path

import pytest

from openenv.errors import ConfigError
from openenv_rollouts import collect, read_records

COUNT = "count_env:CountEnv"

pytestmark = [pytest.mark.usefixtures("no_leftover_processes"),
              pytest.mark.requires_plugins("provider-local", "transport-ws")]


def test_two_replicas_record_every_episode(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    summary = collect(COUNT, episodes=8, concurrency=4, replicas=2, output=out, policy="policies_for_tests:two")
    records = list(read_records(out))
    assert (summary.episodes, summary.ok, summary.errors, summary.restarts) == (8, 8, 0, 0)
    assert sorted(r["episode"] for r in records) == list(range(8))
    assert all(r["num_steps"] == 3 and r["attempts"] == 1 for r in records)


def test_a_replica_killed_mid_run_loses_only_attempts_and_the_run_finishes(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "crashed-once"
    monkeypatch.setenv("COUNT_ENV_CRASH", str(marker))  # the first server to reach step 2 exits
    out = tmp_path / "r.jsonl"
    summary = collect(COUNT, episodes=8, concurrency=4, replicas=2, output=out, policy="policies_for_tests:two",
                      retries=1)
    records = list(read_records(out))
    assert marker.exists()
    assert (summary.episodes, summary.ok, summary.errors) == (8, 8, 0)
    assert sorted(r["episode"] for r in records) == list(range(8))
    # The episodes of the dead replica failed once and finished on a live one.
    assert any(r["attempts"] == 2 for r in records)
    assert summary.restarts <= 1


def test_replicas_with_a_base_url_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--replicas starts servers through a provider"):
        collect(COUNT, episodes=1, replicas=2, base_url="http://127.0.0.1:9", output=tmp_path / "r.jsonl")


def test_eval_over_two_replicas_plays_every_task_k_times(tmp_path: Path, openenv_cli, cli_env) -> None:
    """``openenv eval --replicas 2``: the CLI flag reaches the pool; every (task, sample) is recorded once."""
    out = tmp_path / "run"
    proc = openenv_cli("eval", "target_env:TargetEnv", "--split", "test", "-k", "2", "-c", "4", "--replicas", "2",
                       "--policy", "policies_for_tests:one", "-o", str(out), "--no-report", "-q",
                       env={**cli_env, "PYTHONPATH": str(Path(__file__).parent)}, timeout=180)
    assert proc.returncode == 0, proc.stderr
    records = list(read_records(out / "rollouts.jsonl"))
    assert sorted(r["key"] for r in records) == sorted(f"test-{i}#{s}" for i in range(6) for s in range(2))
    assert all(r["status"] == "ok" for r in records)
