"""Read stored rollouts for re-scoring: the rollouts package's ``openenv.rollout/1`` files (one
episode per line, what ``openenv collect`` writes) and the step-per-line JSONL.

Both become ``Episode`` objects whose ``steps`` pair each action with the observation that
**followed** it, which is what a server's rubric scores. In an ``openenv.rollout/1`` record a
step's ``observation`` is the one the policy saw *before* acting, so step ``t``'s action is paired
with step ``t + 1``'s observation, and the last step's with the episode's ``final_observation``.
The client lifts ``done`` (and ``reward``) out of the observation; when the stored observation is
an object without a ``done`` key, the step's ``done`` is put back into it, so a rubric that reads
``observation.done`` sees what it would have seen on the server. ``Step.reward`` is the stored
reward of the step.

This module reads the format itself: the rubrics package does not depend on the rollouts package.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from openenv.rubric import Step

__all__ = ["ROLLOUT_SCHEMA", "ROLLOUT_SCHEMAS", "Episode", "RescoreError", "read_episodes", "read_rollouts"]

#: The rollouts package's record schema (``openenv_rollouts.records.SCHEMA``).
ROLLOUT_SCHEMA = "openenv.rollout/1"
#: Every record version this reads: ``/2`` adds task, group and token fields, the steps are the same.
ROLLOUT_SCHEMAS = (ROLLOUT_SCHEMA, "openenv.rollout/2", "openenv.rollout/3")

Format = Literal["rollout", "steps"]

_REQUIRED = ("episode_id", "step", "action", "observation")


class RescoreError(ValueError):
    """The rollout file is malformed, or the rubric failed on a line (``line`` says which)."""

    def __init__(self, path: str, line: int | None, message: str) -> None:
        self.path, self.line = path, line
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {message}")


@dataclass
class Episode:
    """One stored episode, ready to score."""

    id: Any
    #: Each action with the observation that followed it and the step's stored reward.
    steps: list[Step]
    #: The input line of each step (for errors); the record's line for every step of a rollout.
    lines: list[int]
    #: The line the episode starts on.
    line: int
    #: ``openenv.rollout/1``: the whole record, as read.
    record: dict[str, Any] | None = None
    #: Step-per-line input: the episode's lines as read, in ``step`` order.
    rows: list[dict[str, Any]] = field(default_factory=list)


def read_rollouts(path: str | Path) -> tuple[Format, list[Episode]]:
    """The episodes of ``path`` and its format: ``"rollout"`` when its records carry
    ``"schema": "openenv.rollout/1"``, ``"steps"`` for the step-per-line JSONL. Mixing the two
    in one file, another schema, or a malformed line is a ``RescoreError`` naming ``file:line``."""
    name = str(path)
    fmt: Format | None = None
    records: list[tuple[int, dict[str, Any]]] = []
    with open(path, encoding="utf-8") as fh:
        for lineno, text in enumerate(fh, 1):
            if not text.strip():
                continue
            try:
                record = json.loads(text)
            except json.JSONDecodeError as exc:
                hint = ("" if fmt != "rollout" else " A torn last line from a killed `openenv collect` is "
                        "cut off by `openenv collect --resume` or openenv_rollouts.records.repair(path).")
                raise RescoreError(name, lineno, f"not JSON ({exc.msg} at column {exc.colno}).{hint}") from None
            if not isinstance(record, dict):
                raise RescoreError(name, lineno, "each line must be a JSON object.")
            kind: Format = "rollout" if "schema" in record else "steps"
            if kind == "rollout" and record["schema"] not in ROLLOUT_SCHEMAS:
                raise RescoreError(name, lineno, f"schema {record['schema']!r} is not one this version reads "
                                                 f"({', '.join(map(repr, ROLLOUT_SCHEMAS))}, or step lines "
                                                 "without a schema).")
            if fmt is None:
                fmt = kind
            elif kind != fmt:
                raise RescoreError(name, lineno, f"mixes {ROLLOUT_SCHEMA} records and step lines; "
                                                 "one file holds one format.")
            records.append((lineno, record))
    if fmt == "rollout":
        return fmt, [_rollout_episode(name, lineno, record) for lineno, record in records]
    return "steps", _step_episodes(name, records)


def read_episodes(path: str | Path) -> list[Episode]:
    """The episodes of ``path`` (either format; see ``read_rollouts``)."""
    return read_rollouts(path)[1]


def _rollout_episode(path: str, lineno: int, record: dict[str, Any]) -> Episode:
    key, steps = record.get("key"), record.get("steps")
    if not isinstance(key, str):
        raise RescoreError(path, lineno, f"an {ROLLOUT_SCHEMA} record needs a string 'key', got {key!r}.")
    if not isinstance(steps, list) or "final_observation" not in record:
        raise RescoreError(path, lineno, f"an {ROLLOUT_SCHEMA} record needs 'steps' (a list) and "
                                         "'final_observation'.")
    for t, step in enumerate(steps):
        if not isinstance(step, dict) or "action" not in step or "observation" not in step:
            raise RescoreError(path, lineno, f"episode {key!r}: step {t} needs 'action' and 'observation'.")
    paired: list[Step] = []
    for t, step in enumerate(steps):
        after = steps[t + 1]["observation"] if t + 1 < len(steps) else record["final_observation"]
        if isinstance(after, dict) and "done" not in after:
            after = {**after, "done": bool(step.get("done"))}
        paired.append(Step(step["action"], after, _reward(step.get("reward"))))
    return Episode(key, paired, [lineno] * len(steps), lineno, record=record)


def _step_episodes(path: str, records: list[tuple[int, dict[str, Any]]]) -> list[Episode]:
    """Group step lines by episode (first-appearance order), each sorted by ``step``."""
    grouped: dict[Any, list[tuple[int, dict[str, Any]]]] = {}
    for lineno, record in records:
        missing = [k for k in _REQUIRED if k not in record]
        if missing:
            raise RescoreError(path, lineno, f"missing {', '.join(missing)}; each line needs "
                                             f"{', '.join(_REQUIRED)} (or give an {ROLLOUT_SCHEMA} file).")
        eid = record["episode_id"]
        if not isinstance(eid, str | int) or isinstance(eid, bool):
            raise RescoreError(path, lineno, f"episode_id must be a string or integer, got {eid!r}.")
        if not isinstance(record["step"], int) or isinstance(record["step"], bool):
            raise RescoreError(path, lineno, f"step must be an integer, got {record['step']!r}.")
        grouped.setdefault(eid, []).append((lineno, record))
    episodes: list[Episode] = []
    for eid, rows in grouped.items():
        rows.sort(key=lambda row: row[1]["step"])
        numbers = [r["step"] for _, r in rows]
        if len(set(numbers)) != len(numbers):
            raise RescoreError(path, None, f"episode {eid!r} has duplicate step numbers.")
        steps = [Step(r["action"], r["observation"], _reward(r.get("reward"))) for _, r in rows]
        episodes.append(Episode(eid, steps, [n for n, _ in rows], rows[0][0], rows=[r for _, r in rows]))
    return episodes


def _reward(value: Any) -> float | None:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None
