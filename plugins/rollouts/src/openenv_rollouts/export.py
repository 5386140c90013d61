"""Parquet (one row per episode) from a rollout JSONL file, loadable with
``datasets.load_dataset("parquet", data_files=...)`` or pyarrow/pandas.

Columns keep the record's scalar fields as typed columns; values whose shape differs from env
to env (``task``, ``error``, observations, actions, component maps) are JSON text, so one schema
fits every env. ``steps`` is a list of structs (``t``, ``observation``, ``action``, ``reward``,
``components``, ``done``, ``env_s``, ``policy_s``), and ``samples`` a list of structs (``branch``,
``input_ids``, ``loss_mask``, ``logprobs``, ``reward``, ``task_id``, ``group_id``, ``drift`` as JSON text).
``images`` holds the bytes of every image the episode's observations reference (``openenv_rollouts.images``:
the JSONL keeps files beside it), one struct per distinct image (``sha256``, ``media_type``, ``path`` as in
the reference, ``data`` binary), so the Parquet file needs no images folder.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from openenv_rollouts.images import image_refs, load_image
from openenv_rollouts.records import read_records

__all__ = ["PARQUET_SCHEMA_VERSION", "to_parquet"]

PARQUET_SCHEMA_VERSION = "openenv.rollout/3"


def _text(value: Any) -> str | None:
    return None if value is None else json.dumps(value, separators=(",", ":"), sort_keys=True)


def _arrow_schema() -> Any:
    import pyarrow as pa

    step = pa.struct([("t", pa.int32()), ("observation", pa.string()), ("action", pa.string()),
                      ("reward", pa.float64()), ("components", pa.string()), ("done", pa.bool_()),
                      ("env_s", pa.float64()), ("policy_s", pa.float64()), ("llm", pa.string())])
    sample = pa.struct([("branch", pa.int32()), ("input_ids", pa.list_(pa.int64())),
                        ("loss_mask", pa.list_(pa.int8())), ("logprobs", pa.list_(pa.float32())),
                        ("reward", pa.float64()), ("task_id", pa.string()), ("group_id", pa.string()),
                        ("drift", pa.string())])
    image = pa.struct([("sha256", pa.string()), ("media_type", pa.string()), ("path", pa.string()),
                       ("data", pa.binary())])
    return pa.schema([
        ("schema", pa.string()), ("key", pa.string()), ("episode", pa.int64()), ("env", pa.string()),
        ("policy", pa.string()), ("seed", pa.int64()), ("task", pa.string()), ("task_id", pa.string()),
        ("split", pa.string()), ("group_id", pa.string()), ("sample", pa.int32()), ("status", pa.string()),
        ("error", pa.string()), ("attempts", pa.int32()), ("reward", pa.float64()),
        ("reward_components", pa.string()), ("num_steps", pa.int32()), ("done", pa.bool_()),
        ("truncated", pa.bool_()), ("final_observation", pa.string()), ("started_at", pa.float64()),
        ("duration_s", pa.float64()), ("steps", pa.list_(step)),
        ("samples", pa.list_(sample)), ("images", pa.list_(image)),
    ], metadata={"openenv.schema": PARQUET_SCHEMA_VERSION})


def _images(doc: dict[str, Any], base: Path) -> list[dict[str, Any]]:
    seen: dict[str, dict[str, Any]] = {}
    for value in (*(s.get("observation") for s in doc.get("steps") or []), doc.get("final_observation")):
        for ref in image_refs(value):
            if ref["sha256"] not in seen:
                seen[ref["sha256"]] = {"sha256": ref["sha256"], "media_type": ref.get("media_type"),
                                       "path": ref["image"], "data": load_image(ref, base).data}
    return list(seen.values())


def _row(doc: dict[str, Any], base: Path) -> dict[str, Any]:
    row = {k: doc.get(k) for k in ("schema", "key", "episode", "env", "policy", "seed", "status", "attempts",
                                   "reward", "num_steps", "done", "truncated", "started_at", "duration_s", "task_id",
                                   "split", "group_id", "sample")}
    for k in ("task", "error", "reward_components", "final_observation"):
        row[k] = _text(doc.get(k))
    row["steps"] = [{"t": s["t"], "observation": _text(s.get("observation")), "action": _text(s.get("action")),
                     "reward": s.get("reward"), "components": _text(s.get("components") or {}),
                     "done": bool(s.get("done")), "env_s": s.get("env_s"), "policy_s": s.get("policy_s"),
                     "llm": _text(s.get("llm"))}
                    for s in doc.get("steps") or []]
    samples = doc.get("samples")
    row["samples"] = None if samples is None else [
        {"branch": s.get("branch"), "input_ids": s.get("input_ids"), "loss_mask": s.get("loss_mask"),
         "logprobs": s.get("logprobs"), "reward": s.get("reward"), "task_id": s.get("task_id"),
         "group_id": s.get("group_id"), "drift": _text(s.get("drift"))} for s in samples]
    row["images"] = _images(doc, base)
    return row


def to_parquet(jsonl: Path | str, out: Path | str) -> Path:
    """Write ``out`` (a ``.parquet`` file) from the records of ``jsonl``; returns ``out``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    target = Path(out)
    target.parent.mkdir(parents=True, exist_ok=True)
    rows = [_row(doc, Path(jsonl).parent) for doc in read_records(Path(jsonl))]
    table = pa.Table.from_pylist(rows, schema=_arrow_schema())
    tmp = target.with_name(target.name + ".tmp")
    pq.write_table(table, tmp)
    tmp.replace(target)
    return target
