"""Training samples from an ``EpisodeTrace``: one per branch, ready for a trainer.

A branch's turns extend one another by exact token prefix, so its last turn's ``prompt_ids +
completion_ids`` holds the whole branch. In that sequence the tokens the model sampled (every
turn's completion, the engine's ids) get loss-mask 1 and their logprobs; everything the agent,
its tools or the env wrote (system and user text, tool results, the chat template's markup) gets
mask 0 and logprob 0.0. A turn without ids (``ids_source="missing"``) or a failed turn gives no
sample: a sample is never built from a re-tokenisation.

Every branch of an episode gets the episode's reward and components (the env judged the episode,
not a branch); ``branch``, ``drift`` and ``num_branches`` let a trainer drop or down-weight the
branches that an agent's rewrites cut off.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from openenv_gateway.trace import EpisodeTrace

__all__ = ["SAMPLE_SCHEMA", "TrainingSample", "samples_from_trace", "samples_to_parquet"]

#: Version of a sample's layout (the ``samples`` of an ``openenv.rollout/3`` record, and the Parquet file).
SAMPLE_SCHEMA = "openenv.sample/1"


@dataclass
class TrainingSample:
    """One branch of one episode as token ids, loss mask and logprobs, with the episode's verdict."""

    episode_id: str
    branch: int
    input_ids: list[int]
    loss_mask: list[int]
    logprobs: list[float]
    reward: float | None
    reward_components: dict[str, float] = field(default_factory=dict)
    task_id: str | None = None
    group_id: str | None = None
    turns: list[int] = field(default_factory=list)
    num_branches: int = 1
    drift: dict[str, Any] | None = None

    @property
    def num_completion_tokens(self) -> int:
        return sum(self.loss_mask)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SAMPLE_SCHEMA, **asdict(self)}


def samples_from_trace(trace: EpisodeTrace, *, reward: float | None, reward_components: dict[str, float] | None = None,
                       task_id: str | None = None, group_id: str | None = None) -> list[TrainingSample]:
    """One sample per branch whose turns all carry the engine's ids (in branch order)."""
    usable = [b for b in trace.branches
              if all(trace.turns[i].ids_source == "engine" and trace.turns[i].error is None for i in b.turns)]
    samples = []
    for branch in usable:
        last = trace.turns[branch.turns[-1]]
        ids = last.full_ids
        mask = [0] * len(ids)
        logprobs = [0.0] * len(ids)
        for i in branch.turns:
            turn = trace.turns[i]
            start = len(turn.prompt_ids)
            for offset, _ in enumerate(turn.completion_ids):
                mask[start + offset] = 1
                logprobs[start + offset] = turn.logprobs[offset] if offset < len(turn.logprobs) else 0.0
        samples.append(TrainingSample(
            episode_id=trace.episode_id, branch=branch.index, input_ids=ids, loss_mask=mask, logprobs=logprobs,
            reward=reward, reward_components=dict(reward_components or {}),
            task_id=task_id if task_id is not None else trace.meta.get("task_id"),
            group_id=group_id if group_id is not None else trace.meta.get("group_id"),
            turns=list(branch.turns), num_branches=len(trace.branches),
            drift=branch.drift.to_dict() if branch.drift else None))
    return samples


def samples_to_parquet(samples: list[TrainingSample], out: Path | str) -> Path:
    """Write ``samples`` as a Parquet file (one row per sample); needs ``openenvkit-gateway[parquet]``."""
    import json

    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema([
        ("episode_id", pa.string()), ("branch", pa.int32()), ("task_id", pa.string()), ("group_id", pa.string()),
        ("input_ids", pa.list_(pa.int64())), ("loss_mask", pa.list_(pa.int8())), ("logprobs", pa.list_(pa.float32())),
        ("reward", pa.float64()), ("reward_components", pa.map_(pa.string(), pa.float64())),
        ("turns", pa.list_(pa.int32())), ("num_branches", pa.int32()), ("drift", pa.string()),
    ], metadata={"openenv.schema": SAMPLE_SCHEMA})
    rows = [{"episode_id": s.episode_id, "branch": s.branch, "task_id": s.task_id, "group_id": s.group_id,
             "input_ids": s.input_ids, "loss_mask": s.loss_mask, "logprobs": s.logprobs, "reward": s.reward,
             "reward_components": list(s.reward_components.items()), "turns": s.turns,
             "num_branches": s.num_branches, "drift": json.dumps(s.drift) if s.drift else None} for s in samples]
    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    pq.write_table(pa.Table.from_pylist(rows, schema=schema), tmp)
    tmp.replace(target)  # never a half-written file under the final name
    return target
