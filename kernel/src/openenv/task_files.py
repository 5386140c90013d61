"""Reading task rows from files: JSON Lines, Parquet and ``datasets`` ``save_to_disk`` folders.

``read_rows(path)`` yields ``(row number, mapping)`` pairs (1-based; the line number for JSONL) and
raises ``TaskError`` naming the file and row for anything it cannot read. ``openenv.tasks.TaskFile``
turns the rows into tasks and checks them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from openenv.tasks import TaskError

__all__ = ["read_rows"]

_SUFFIXES = (".jsonl", ".parquet")


def read_rows(path: Path) -> Iterator[tuple[int, Any]]:
    """The rows of the task file or folder at ``path``."""
    if path.is_dir():
        yield from _dataset_rows(path)
        return
    if not path.exists():
        hint = ""
        if path.parent.is_dir():
            from openenv.errors import did_you_mean

            hint = did_you_mean(path.name, [p.name for p in path.parent.iterdir()])
        raise TaskError(f"task file not found.{hint} Ship it inside the package (package data) and "
                        "give its path relative to the package folder.", file=str(path))
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        yield from _jsonl_rows(path)
    elif suffix == ".parquet":
        yield from _parquet_rows(path)
    else:
        raise TaskError(f"unsupported task file type '{suffix or path.name}': use one of "
                        f"{', '.join(_SUFFIXES)}, or a folder written by datasets' save_to_disk.",
                        file=str(path))


def _jsonl_rows(path: Path) -> Iterator[tuple[int, Any]]:
    try:
        handle = path.open(encoding="utf-8")
    except OSError as exc:
        raise TaskError(f"cannot read the task file: {exc.strerror or exc}.", file=str(path)) from None
    with handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield number, json.loads(line)
            except json.JSONDecodeError as exc:
                raise TaskError(f"not valid JSON at column {exc.colno}: {exc.msg}. Each line of a .jsonl "
                                "file is one JSON object.", file=str(path), row=number) from None


def _parquet_rows(path: Path) -> Iterator[tuple[int, Any]]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise TaskError("reading .parquet task files needs pyarrow: `pip install pyarrow`, or convert "
                        "the file to .jsonl.", file=str(path)) from None
    try:
        table = pq.read_table(path)
    except Exception as exc:  # pyarrow raises its own error types for corrupt files
        raise TaskError(f"cannot read the Parquet file: {exc}.", file=str(path)) from None
    yield from enumerate(table.to_pylist(), start=1)


def _dataset_rows(path: Path) -> Iterator[tuple[int, Any]]:
    try:
        import datasets
    except ImportError:
        raise TaskError("reading a datasets save_to_disk folder needs the `datasets` package: "
                        "`pip install datasets`, or export the rows to .jsonl.", file=str(path)) from None
    try:
        loaded = datasets.load_from_disk(str(path))
    except Exception as exc:
        raise TaskError(f"cannot load the dataset folder: {exc}. It must be written by "
                        "Dataset.save_to_disk or DatasetDict.save_to_disk.", file=str(path)) from None
    if isinstance(loaded, datasets.DatasetDict):
        row = 0
        for split, part in loaded.items():
            for record in part:
                row += 1
                # A DatasetDict names the split of its rows; a row's own column still wins.
                yield row, {"split": split, **record}
    else:
        yield from enumerate(loaded, start=1)
