"""End to end: a black-box agent program → the capture gateway → the tiny-model server; the served
echo env's verdict → a training sample in an ``openenv.rollout/3`` record and a Parquet file."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

#: The agent program: three one-token calls through the gateway, then its words on stdout.
AGENT = [sys.executable, str(Path(__file__).with_name("agent_one_token.py"))]


def test_agent_to_sample_end_to_end(gateway: Any, echo_server: tuple[str, str], tmp_path: Path) -> None:
    from openenv.client import GenericEnvClient
    from openenv_gateway.harness import CommandHarness, env_verdict
    from openenv_rollouts import EpisodeRecord, read_records
    from openenv_rollouts.export import to_parquet
    from openenv_rollouts.records import RolloutWriter

    base_url, token = echo_server
    env = GenericEnvClient(base_url, token=token).sync()
    try:
        def setup() -> str:
            first = env.reset()
            return f"The env says {first.observation}. Answer with words."

        harness = CommandHarness(gateway, AGENT, deadline_s=120, grade_reserve_s=20)
        episode = harness.run(episode_id="echo-1", task_id="echo-task", group_id="g0", setup=setup,
                              verdict=env_verdict(env, lambda run: {"message": run.stdout.strip() or "(nothing)"}))
    finally:
        env.close()
    assert episode.error is None, episode.run and episode.run.stderr[-2000:]
    assert episode.run is not None
    answer = episode.run.stdout.strip() or "(nothing)"
    assert episode.reward == pytest.approx(0.1 * len(answer))  # the echo env's own reward for that answer
    (sample,) = episode.samples  # three one-token turns, linked into one branch
    assert [t.branch for t in episode.trace.turns] == [0, 0, 0] and sample.num_completion_tokens == 3
    assert [i for i, m in zip(sample.input_ids, sample.loss_mask, strict=True) if m] == \
        [t.completion_ids[0] for t in episode.trace.turns]
    assert sample.reward == episode.reward and sample.task_id == "echo-task"

    path = tmp_path / "rollouts.jsonl"
    with RolloutWriter(path, append=False) as writer:
        writer.write(EpisodeRecord(key="echo-task#0", episode=0, env="echo", policy="agent:command", seed=None,
                                   task=None, **episode.record_fields()))
    (doc,) = read_records(path)
    assert doc["schema"] == "openenv.rollout/3" and doc["samples"][0]["input_ids"] == sample.input_ids
    import pyarrow.parquet as pq

    row = pq.read_table(to_parquet(path, tmp_path / "rollouts.parquet")).to_pylist()[0]
    assert row["samples"][0]["loss_mask"] == sample.loss_mask and row["reward"] == pytest.approx(episode.reward)


def test_the_black_box_rollout_func_returns_trls_fields(gateway: Any, echo_server: tuple[str, str]) -> None:
    from openenv.client import GenericEnvClient
    from openenv_gateway.harness import CommandHarness, env_verdict
    from openenv_gateway.trl import harness_rollout_func

    base_url, token = echo_server
    clients: list[Any] = []

    def episode_args(prompt: Any, index: int) -> dict[str, Any]:
        env = GenericEnvClient(base_url, token=token).sync()
        clients.append(env)
        env.reset()
        return {"episode_id": f"p{index}", "prompt": str(prompt), "task_id": "echo", "group_id": "g",
                "verdict": env_verdict(env, lambda run: {"message": run.stdout.strip() or "(nothing)"})}

    harness = CommandHarness(gateway, AGENT, deadline_s=120, grade_reserve_s=20)
    try:
        out = harness_rollout_func(harness, episode_args)(["say hi", "say bye"], None)
    finally:
        for env in clients:
            env.close()
    assert set(out) == {"prompt_ids", "completion_ids", "logprobs", "env_mask", "env_reward"}
    for k in range(2):
        assert out["prompt_ids"][k] and sum(out["env_mask"][k]) == 3
        assert len(out["completion_ids"][k]) == len(out["logprobs"][k]) == len(out["env_mask"][k])
        assert out["env_reward"][k] > 0
