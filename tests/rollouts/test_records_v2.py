"""Schema ``openenv.rollout/2``: groups in collect, token data from a real chat-completions server,
and ``/1`` files still read (by the rollouts package and by ``openenv rubrics rescore``)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from openenv_rollouts import collect, read_records
from openenv_rollouts.export import to_parquet

COUNT = "count_env:CountEnv"
pytestmark = pytest.mark.usefixtures("no_leftover_processes")


def test_groups_share_task_seed_and_group_id_and_draw_their_own_actions(tmp_path: Path) -> None:
    out = tmp_path / "r.jsonl"
    summary = collect(COUNT, episodes=7, concurrency=3, seed=10, output=out, policy="random", group_size=3,
                      tasks=[{"task": "alpha"}, {"task": "beta"}])
    assert summary.episodes == 7
    records = sorted(read_records(out), key=lambda r: r["episode"])
    groups: dict[str, list[dict]] = {}
    for r in records:
        assert r["schema"] == "openenv.rollout/3"
        groups.setdefault(r["group_id"], []).append(r)
    assert [len(g) for g in groups.values()] == [3, 3, 1]  # the last group is cut by -n
    for number, members in enumerate(groups.values()):
        assert {m["seed"] for m in members} == {10 + number}
        task = ["alpha", "beta"][number % 2]
        assert all(m["task"] == {"task": task} and m["steps"][0]["observation"]["task"] == task for m in members)
    # the members draw their own actions (a group of identical completions has no variance to learn from)
    first = [[s["action"]["n"] for s in m["steps"]] for m in groups[records[0]["group_id"]]]
    assert len({tuple(a) for a in first}) > 1
    # the same run again names its groups the same (a resumed run continues the same groups)
    from openenv_rollouts.plan import CollectPlan

    plan = CollectPlan(env=COUNT, episodes=7, seed=10, rows=[{"task": "alpha"}], group_size=3)
    assert [plan.spec(i).group_id for i in range(7)] == [r["group_id"] for r in records]
    without = collect(COUNT, episodes=2, output=tmp_path / "plain.jsonl", policy="policies_for_tests:two")
    assert without.ok == 2
    assert all(r["group_id"] is None and r["task_id"] is None for r in read_records(tmp_path / "plain.jsonl"))


def _token_reply(body: dict, n: int):
    from openenv_rubrics.testing import Reply

    content = json.dumps({"n": 1})
    doc = {"id": "x", "object": "chat.completion", "created": int(time.time()), "model": body["model"],
           "prompt_token_ids": [1, 2, 3, n],
           "choices": [{"index": 0, "finish_reason": "stop", "token_ids": [7, 8],
                        "message": {"role": "assistant", "content": content},
                        "logprobs": {"content": [{"token": "{", "logprob": -0.25, "bytes": [123]},
                                                 {"token": "}", "logprob": -1.5, "bytes": [125]}]}}],
           "usage": {"prompt_tokens": 40 + n, "completion_tokens": 2, "total_tokens": 42 + n}}
    if n % 2:  # an endpoint that sends no token data: the step keeps only what was sent
        doc = {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}
    return Reply(body=json.dumps(doc))


def test_llm_policy_records_token_usage_ids_and_logprobs(tmp_path: Path) -> None:
    from openenv_rubrics.testing import FakeChatServer

    out = tmp_path / "r.jsonl"
    with FakeChatServer(_token_reply) as chat:
        summary = collect(COUNT, episodes=1, concurrency=1, output=out, policy="llm",
                          llm={"base_url": chat.url, "model": "tiny", "logprobs": True})
        requests = list(chat.requests)
    assert summary.ok == 1 and all(r["logprobs"] is True for r in requests)
    steps = next(read_records(out))["steps"]
    assert len(steps) == 3
    full = steps[0]["llm"]
    assert full["usage"] == {"prompt_tokens": 40, "completion_tokens": 2, "total_tokens": 42}
    assert full["logprobs"] == [-0.25, -1.5] and full["tokens"] == ["{", "}"]
    assert full["token_ids"] == [7, 8] and full["prompt_token_ids"] == [1, 2, 3, 0]
    assert full["model"] == "tiny" and full["finish_reason"] == "stop"
    assert steps[1]["llm"] == {}  # nothing invented
    assert steps[2]["llm"]["prompt_token_ids"][-1] == 2
    pq = to_parquet(out, tmp_path / "r.parquet")
    import pyarrow.parquet as papq

    row = papq.read_table(pq).to_pylist()[0]
    assert json.loads(row["steps"][0]["llm"])["logprobs"] == [-0.25, -1.5]


def _as_v1(src: Path, dst: Path) -> None:
    """What an earlier version wrote: schema /1, no task/group fields, no step llm."""
    lines = []
    for r in read_records(src):
        r = {k: v for k, v in r.items() if k not in ("task_id", "split", "group_id", "sample")}
        r["schema"] = "openenv.rollout/1"
        r["steps"] = [{k: v for k, v in s.items() if k != "llm"} for s in r["steps"]]
        lines.append(json.dumps(r))
    dst.write_text("\n".join(lines) + "\n")


def test_version_1_files_still_read_and_rescore(tmp_path: Path) -> None:
    from openenv_rubrics import rubric_from_spec
    from openenv_rubrics.rescore import rescore

    out, old = tmp_path / "r.jsonl", tmp_path / "old.jsonl"
    collect("echo", episodes=2, concurrency=1, seed=1, output=out, policy="random", max_steps=3)
    _as_v1(out, old)
    assert [r["schema"] for r in read_records(old)] == ["openenv.rollout/1"] * 2
    pq = to_parquet(old, tmp_path / "old.parquet")
    import pyarrow.parquet as papq

    assert papq.read_table(pq).to_pylist()[0]["group_id"] is None
    spec = "length_score=response=observation.echoed_message,scale=0.1,name=length"
    for path in (out, old):
        summary = rescore(path, rubric_from_spec(spec), tmp_path / f"rescored-{path.name}")
        assert summary.episodes == 2
        rescored = list(read_records(tmp_path / f"rescored-{path.name}"))
        before = {r["key"]: r["reward"] for r in read_records(path)}
        assert all(r["reward"] == pytest.approx(before[r["key"]]) for r in rescored)
    bad = tmp_path / "future.jsonl"
    bad.write_text(json.dumps({"schema": "openenv.rollout/9", "key": "x"}) + "\n")
    with pytest.raises(ValueError, match=r"reads openenv\.rollout/1, openenv\.rollout/2, openenv\.rollout/3"):
        list(read_records(bad))
