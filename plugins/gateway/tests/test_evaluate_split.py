"""A black-box agent on every task of the served coding env's ``test`` split, through the gateway in
front of the scripted upstream: the env's verdict becomes each episode's reward and its samples'."""

from __future__ import annotations

import json
import secrets
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from openenv_gateway import CaptureGateway
from openenv_gateway.harness import CommandHarness

SOLVER = [sys.executable, str(Path(__file__).parent / "agents" / "solver.py")]
pytestmark = pytest.mark.requires_plugins("env-coding", "provider-local", "transport-ws", "rollouts", "rubrics")


@pytest.fixture(scope="module")
def coding_server() -> Iterator[tuple[str, str]]:
    from openenv.interfaces import LaunchSpec
    from openenv.plugins import get_plugin_manager

    pm = get_plugin_manager()
    provider = pm.catalog.providers.load(pm.choose_provider("coding", None))()
    token = secrets.token_urlsafe(16)
    handle = provider.start(LaunchSpec(env="coding", max_sessions=8, token=token))
    yield handle.base_url, token
    handle.stop()


def test_every_task_of_the_split_is_played_graded_and_captured(gateway: CaptureGateway,
                                                               coding_server: tuple[str, str], tmp_path: Path) -> None:
    from openenv.client import GenericEnvClient
    from openenv_gateway.evaluate import evaluate_split
    from openenv_rollouts import read_records

    base_url, token = coding_server
    with GenericEnvClient(base_url, token=token).sync() as env:
        split_ids = [t.id for t in env.tasks("test")]
    harness = CommandHarness(gateway, SOLVER, deadline_s=60, grade_reserve_s=15)
    result = evaluate_split(base_url, env="coding", split="test", harness=harness, out_dir=tmp_path, token=token,
                            k=2, action_extra={"submit": True}, concurrency=1)
    summary = result.summary()
    assert [e.task_id for e in result.episodes] == [t for t in split_ids for _ in range(2)]
    solved = {"two_sum", "word_count"}
    for played in result.episodes:
        episode = played.episode
        assert episode.error is None, episode.error
        assert episode.verdict is not None, played.task_id
        # the env's own grade: its hidden tests pass for the solver's two tasks, fail for the rest
        assert episode.reward == (1.0 if played.task_id in solved else 0.0), episode.verdict.info["observation"]
        (sample,) = episode.samples
        assert (sample.reward, sample.task_id, sample.group_id) == (episode.reward, played.task_id, played.task_id)
        assert sample.reward_components["pass_rate"] == episode.reward
    assert summary["episodes"] == 2 * len(split_ids) and summary["samples"] == summary["episodes"]
    assert summary["success_rate"] == pytest.approx(len(solved) / len(split_ids))
    assert summary["per_task"]["two_sum"] == 1.0 and summary["errors"] == 0

    docs = list(read_records(tmp_path / "rollouts.jsonl"))
    assert sorted(d["key"] for d in docs) == sorted(f"{t}#{s}" for t in split_ids for s in range(2))
    for doc in docs:
        assert doc["schema"] == "openenv.rollout/3" and doc["split"] == "test" and doc["group_id"] == doc["task_id"]
        assert doc["samples"][0]["reward"] == doc["reward"]
        assert doc["final_observation"]["tests_total"] > 0
    import pyarrow.parquet as pq

    rows = pq.read_table(tmp_path / "samples.parquet").to_pylist()
    assert len(rows) == len(docs) and {r["task_id"] for r in rows} == set(split_ids)


def test_an_unknown_split_names_the_env_splits(gateway: CaptureGateway, coding_server: tuple[str, str],
                                               tmp_path: Path) -> None:
    from openenv.errors import ValidationError
    from openenv_gateway.evaluate import evaluate_split

    base_url, token = coding_server
    harness = CommandHarness(gateway, SOLVER, deadline_s=60, grade_reserve_s=15)
    with pytest.raises(ValidationError, match="train"):
        evaluate_split(base_url, env="coding", split="tset", harness=harness, out_dir=tmp_path, token=token)


def test_the_cli_plays_a_split_and_writes_the_run(scripted_url: str, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from openenv.cli.main import build_app

    out = tmp_path / "run"
    argv = ["agent-eval", "coding", "--split", "test", "--model-url", scripted_url + "/v1",
            "--agent", " ".join(SOLVER), "--limit", "2", "-o", str(out), "--json"]
    result = CliRunner().invoke(build_app(argv), argv)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)  # stderr (log lines) is kept apart
    assert doc["per_task"] == {"two_sum": 1.0, "word_count": 1.0} and doc["model_calls"] == 2
    assert Path(doc["rollouts"]).exists() and Path(doc["samples_parquet"]).exists()


def test_the_cli_refuses_bad_options_with_a_hint(scripted_url: str, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from openenv.cli.main import build_app

    runner, app = CliRunner(), build_app(["agent-eval"])
    bad = runner.invoke(app, ["agent-eval", "coding", "--model-url", scripted_url, "--action-extra", "[1]",
                              "-o", str(tmp_path)])
    assert bad.exit_code == 2 and "--action-extra must be a JSON object" in bad.output
    split = runner.invoke(app, ["agent-eval", "coding", "--model-url", scripted_url, "--split", "tset",
                                "-o", str(tmp_path)])
    assert split.exit_code == 2 and "train" in split.output
