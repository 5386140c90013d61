"""Records, torn-line repair, Parquet export, the report and the LLM reply parser, without a server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from openenv_rollouts import SCHEMA, EpisodeRecord, StepRecord, read_records, repair
from openenv_rollouts.export import to_parquet
from openenv_rollouts.llm import parse_json_action
from openenv_rollouts.policies import PolicyError, make_policy
from openenv_rollouts.records import RolloutWriter


def _record(i: int, status: str = "ok") -> EpisodeRecord:
    steps = [StepRecord(t=t, observation={"pos": [t, i]}, action={"move": "up"}, reward=0.5,
                        components={"a": 0.25}, done=t == 1, env_s=0.001, policy_s=0.0) for t in range(2)]
    return EpisodeRecord(key=f"ep-{i:06d}", episode=i, env="fake", policy="first", seed=i, task={"level": i},
                         status=status, reward=1.0, reward_components={"a": 0.5}, done=True, steps=steps)


def test_writer_repair_and_read(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with RolloutWriter(path, append=False) as writer:
        for i in range(3):
            writer.write(_record(i))
    docs = list(read_records(path))
    assert [d["key"] for d in docs] == ["ep-000000", "ep-000001", "ep-000002"]
    assert docs[0]["schema"] == SCHEMA and docs[0]["num_steps"] == 2 and docs[0]["steps"][1]["done"]
    with path.open("a") as f:
        f.write('{"schema": "openenv.rollout/1", "key": "ep-0000')  # a run killed mid-line
    assert len(list(read_records(path))) == 3
    assert repair(path) > 0 and path.read_text().endswith("\n")
    with RolloutWriter(path, append=True) as writer:
        writer.write(_record(3))
    assert [d["episode"] for d in read_records(path)] == [0, 1, 2, 3]
    path.write_text(path.read_text().replace('"ep-000001"', '"ep-000001', 1))
    with pytest.raises(ValueError, match="damaged before its end"):
        list(read_records(path))


def test_a_written_line_is_in_the_file_before_write_returns_and_fsynced_soon(tmp_path: Path) -> None:
    from openenv.testing import wait_until

    path = tmp_path / "r.jsonl"
    writer = RolloutWriter(path, append=False, sync_every_s=0.01)
    try:
        writer.write(_record(0))
        # already in the kernel's page cache (what a kill -9 of this process keeps), not in a buffer
        assert json.loads(path.read_bytes())["key"] == "ep-000000"
        assert wait_until(lambda: writer.synced == writer.written == 1, timeout_s=5)
        for i in range(1, 50):
            writer.write(_record(i))
    finally:
        writer.close()
    assert writer.synced == writer.written == 50  # close fsyncs what is left
    assert [d["episode"] for d in read_records(path)] == list(range(50))


def test_the_line_is_the_record_as_json(tmp_path: Path) -> None:
    from pydantic import BaseModel

    from openenv_rollouts.records import UnwritableRecord

    class Move(BaseModel):
        move: str

    record = _record(0)
    record.steps[0].action = Move(move="up")  # a model: dumped
    record.steps[0].observation = {"x": float("nan"), 3: (1, 2), "odd": {1, 2}}
    line = record.to_line()
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    doc = json.loads(line)
    assert doc == record.to_json() and list(doc) == list(_record(0).to_json())
    step = doc["steps"][0]
    assert list(step) == ["t", "observation", "action", "reward", "components", "done", "env_s", "policy_s", "llm"]
    assert step["action"] == {"move": "up"} and step["observation"] == {"x": None, "3": [1, 2], "odd": "{1, 2}"}
    assert doc["steps"][1] == record.steps[1].to_json() == {
        "t": 1, "observation": {"pos": [1, 0]}, "action": {"move": "up"}, "reward": 0.5,
        "components": {"a": 0.25}, "done": True, "env_s": 0.001, "policy_s": 0.0, "llm": None}
    record.task = {"big": 2**70}  # beyond orjson: the standard library writes it
    assert json.loads(record.to_line())["task"] == {"big": 2**70}
    loop: dict[str, object] = {}
    loop["me"] = loop
    record.task = loop
    with pytest.raises(UnwritableRecord, match="not representable as JSON"):
        record.to_line()


def test_parquet_keeps_every_field(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    path = tmp_path / "r.jsonl"
    with RolloutWriter(path, append=False) as writer:
        writer.write(_record(0))
        writer.write(_record(1, status="error"))
    table = pq.read_table(to_parquet(path, tmp_path / "r.parquet"))
    rows = table.to_pylist()
    assert table.schema.metadata[b"openenv.schema"] == SCHEMA.encode()
    assert [r["status"] for r in rows] == ["ok", "error"] and rows[1]["seed"] == 1
    assert json.loads(rows[0]["task"]) == {"level": 0}
    assert json.loads(rows[0]["steps"][1]["observation"]) == {"pos": [1, 0]}
    assert json.loads(rows[0]["reward_components"]) == {"a": 0.5}


def test_samples_travel_in_the_record_and_the_parquet_file(tmp_path: Path) -> None:
    """Schema /3: an agent episode's training samples (openenv_gateway.samples) in the record."""
    import pyarrow.parquet as pq

    sample = {"schema": "openenv.sample/1", "episode_id": "e", "branch": 0, "input_ids": [5, 6, 7, 8],
              "loss_mask": [0, 0, 1, 1], "logprobs": [0.0, 0.0, -0.25, -1.5], "reward": 1.0,
              "reward_components": {"tests": 1.0}, "task_id": "t", "group_id": "g", "turns": [0],
              "num_branches": 1, "drift": None}
    path = tmp_path / "r.jsonl"
    with RolloutWriter(path, append=False) as writer:
        record = _record(0)
        record.samples = [sample]
        writer.write(record)
        writer.write(_record(1))
    first, second = read_records(path)
    assert first["schema"] == SCHEMA == "openenv.rollout/3"
    assert first["samples"] == [sample] and second["samples"] is None
    rows = pq.read_table(to_parquet(path, tmp_path / "r.parquet")).to_pylist()
    assert rows[0]["samples"][0]["loss_mask"] == [0, 0, 1, 1] and rows[0]["samples"][0]["input_ids"] == [5, 6, 7, 8]
    assert rows[0]["samples"][0]["logprobs"] == pytest.approx([0.0, 0.0, -0.25, -1.5])
    assert rows[1]["samples"] is None


def test_report_draws_three_pngs(tmp_path: Path) -> None:
    from openenv_rollouts.report import CHARTS, write_report

    path = tmp_path / "r.jsonl"
    with RolloutWriter(path, append=False) as writer:
        for i in range(5):
            writer.write(_record(i))
    page = write_report(path, tmp_path / "rep")
    for name in CHARTS:
        assert (tmp_path / "rep" / name).read_bytes()[:4] == b"\x89PNG"
    assert "<td>5</td>" in page.read_text()


def test_llm_replies_and_policy_names() -> None:
    assert parse_json_action('ok ```json\n{"move": "up"}\n```') == {"move": "up"}
    assert parse_json_action('I pick {"move": "left"} now') == {"move": "left"}
    with pytest.raises(PolicyError, match="not a JSON action"):
        parse_json_action("no idea")
    from openenv.errors import ConfigError
    from openenv_rollouts.envinfo import EnvInfo

    info = EnvInfo({"action": {"type": "object", "properties": {}}})
    with pytest.raises(ConfigError, match="Did you mean 'random'"):
        make_policy("randm", info)
    with pytest.raises(ConfigError, match="has no attribute"):
        make_policy("json:dumpz", info)
    with pytest.raises(ConfigError, match="--llm-base-url"):
        make_policy("llm", info)
