"""The issue's "done when": a black-box agent (``openenv_gateway.agents.simple``) evaluated on a task
split end to end — agent → gateway → the tiny real model; the coding env's verdict → samples in
``openenv.rollout/3`` records and Parquet. A random model solves nothing: reward 0, and every model
call it made is captured with the engine's ids."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow_ok("plays two coding tasks with a real (tiny) model doing up to 3 calls each")


def test_the_shipped_agent_on_the_coding_test_split(model_url: str, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from openenv.cli.main import build_app
    from openenv_rollouts import read_records

    argv = ["agent-eval", "coding", "--split", "test", "--model-url", model_url + "/v1", "--limit", "2",
            "-o", str(tmp_path), "--deadline-s", "240", "--json"]
    result = CliRunner().invoke(build_app(argv), argv)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)  # stderr (log lines) is kept apart
    assert doc["episodes"] == 2 and doc["errors"] == 0 and doc["mean_reward"] == 0.0
    assert doc["model_calls"] >= 2 and doc["samples"] >= 2
    records = list(read_records(tmp_path / "rollouts.jsonl"))
    for record in records:
        assert record["schema"] == "openenv.rollout/3" and record["status"] == "ok"
        assert record["final_observation"]["tests_total"] > 0  # graded by the env's hidden tests
        for sample in record["samples"]:
            assert sample["reward"] == 0.0 and sample["task_id"] == record["task_id"]
            assert sum(sample["loss_mask"]) > 0 and len(sample["logprobs"]) == len(sample["input_ids"])
    import pyarrow.parquet as pq

    assert pq.read_table(tmp_path / "samples.parquet").num_rows == doc["samples"]
