"""Training samples from a captured episode: ids, loss mask over completions only, logprobs, reward,
one sample per branch, and the Parquet file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from openenv_gateway import CaptureGateway
from openenv_gateway.samples import samples_from_trace, samples_to_parquet
from openenv_gateway.testing.scripted import IM_END, render_ids

openai = pytest.importorskip("openai")


def test_one_sample_per_branch_with_completion_tokens_masked_in(gateway: CaptureGateway, tmp_path: Path) -> None:
    key = gateway.open_episode("ep", {"task_id": "t-1", "group_id": "g-1"})
    client = openai.OpenAI(base_url=gateway.base_url + "/v1", api_key=key, max_retries=0)
    history: list[dict[str, Any]] = [{"role": "user", "content": "solve it"}]
    first = client.chat.completions.create(model="m", messages=history).choices[0].message.content
    history += [{"role": "assistant", "content": first}, {"role": "tool", "content": "env says: 7"}]
    client.chat.completions.create(model="m", messages=history)
    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "summary"}])  # rewrite
    trace = gateway.close_episode(key)
    samples = samples_from_trace(trace, reward=1.0, reward_components={"tests": 1.0})
    assert [s.branch for s in samples] == [0, 1] and [s.turns for s in samples] == [[0, 1], [2]]
    main = samples[0]
    assert main.task_id == "t-1" and main.group_id == "g-1" and main.reward == 1.0 and main.num_branches == 2
    assert main.input_ids == trace.turns[1].full_ids
    # exactly the two completions are trainable; the prompt, the tool's text and the template are not
    masked_in = [t for t, m in zip(main.input_ids, main.loss_mask, strict=True) if m]
    assert masked_in == [*b"ok 1", IM_END, *b"ok 3", IM_END]
    tool_text = render_ids(history)[len(trace.turns[0].full_ids):]
    start = len(trace.turns[0].full_ids)
    assert main.loss_mask[start:start + len(tool_text)] == [0] * len(tool_text)
    assert [lp for lp, m in zip(main.logprobs, main.loss_mask, strict=True) if m] == [-0.5] * len(masked_in)
    assert samples[1].drift is not None and samples[1].drift["from_branch"] == 0

    pq = pytest.importorskip("pyarrow.parquet")
    table = pq.read_table(samples_to_parquet(samples, tmp_path / "samples.parquet"))
    assert table.num_rows == 2 and table.schema.metadata[b"openenv.schema"] == b"openenv.sample/1"
    row = table.to_pylist()[0]
    assert row["input_ids"] == main.input_ids and row["loss_mask"] == main.loss_mask
    assert row["reward_components"] == [("tests", 1.0)]


def test_turns_without_engine_ids_give_no_sample(gateway: CaptureGateway) -> None:
    key = gateway.open_episode("ep")
    client = openai.OpenAI(base_url=gateway.base_url + "/v1", api_key=key, max_retries=0)
    client.chat.completions.create(model="no-ids", messages=[{"role": "user", "content": "x"}])
    assert samples_from_trace(gateway.close_episode(key), reward=0.0) == []
