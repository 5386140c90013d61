"""Re-score stored rollouts with another rubric, so a reward change needs no new rollouts.

Input: JSON Lines, one step per line (see the package README)::

    {"episode_id": "ep-1", "step": 0, "action": {...}, "observation": {...}, "reward": 0.5}

Lines of one episode may be interleaved with other episodes' lines; within an episode they are
ordered by ``step``. Output, ``level="step"``: every input line, in episode order, with ``reward``
replaced by the new score and ``previous_reward``, ``reward_components`` (and
``reward_rationales`` / ``reward_error`` when present) and ``rubric`` added. ``level="episode"``:
one line per episode, ``{"episode_id", "steps", "reward", "reward_components", "rubric"}``.

The rubric's ``reset()`` runs before each episode. A rubric fault stops the run with the line it
happened on (declare ``on_error="fallback"`` on the rubric to score through faults; those lines
carry ``reward_error``). The file is read into memory (one episode's steps must be grouped).
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from openenv.rubric import Rubric, RubricError, RubricResult, Step

__all__ = ["RescoreError", "RescoreSummary", "read_episodes", "rescore"]

_REQUIRED = ("episode_id", "step", "action", "observation")


class RescoreError(ValueError):
    """The rollout file is malformed, or the rubric failed on a line (``line`` says which)."""

    def __init__(self, path: str, line: int | None, message: str) -> None:
        self.path, self.line = path, line
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {message}")


@dataclass
class RescoreSummary:
    """What a re-scoring run did."""

    lines: int
    episodes: int
    written: int
    mean_reward: float | None
    fallbacks: int

    def to_json(self) -> dict[str, Any]:
        return {"lines": self.lines, "episodes": self.episodes, "written": self.written,
                "mean_reward": self.mean_reward, "fallbacks": self.fallbacks}


def read_episodes(path: str | Path) -> dict[Any, list[tuple[int, dict[str, Any]]]]:
    """Group the file's lines by episode (first-appearance order), each sorted by ``step``."""
    episodes: dict[Any, list[tuple[int, dict[str, Any]]]] = {}
    with open(path, encoding="utf-8") as fh:
        for lineno, text in enumerate(fh, 1):
            if not text.strip():
                continue
            try:
                record = json.loads(text)
            except json.JSONDecodeError as exc:
                raise RescoreError(str(path), lineno, f"not JSON ({exc.msg} at column {exc.colno}).") from None
            if not isinstance(record, dict):
                raise RescoreError(str(path), lineno, "each line must be a JSON object.")
            missing = [k for k in _REQUIRED if k not in record]
            if missing:
                raise RescoreError(str(path), lineno, f"missing {', '.join(missing)}; each line needs "
                                                      f"{', '.join(_REQUIRED)}.")
            eid = record["episode_id"]
            if not isinstance(eid, str | int) or isinstance(eid, bool):
                raise RescoreError(str(path), lineno, f"episode_id must be a string or integer, got {eid!r}.")
            if not isinstance(record["step"], int) or isinstance(record["step"], bool):
                raise RescoreError(str(path), lineno, f"step must be an integer, got {record['step']!r}.")
            episodes.setdefault(eid, []).append((lineno, record))
    for eid, rows in episodes.items():
        rows.sort(key=lambda row: row[1]["step"])
        steps = [r["step"] for _, r in rows]
        if len(set(steps)) != len(steps):
            raise RescoreError(str(path), None, f"episode {eid!r} has duplicate step numbers.")
    return episodes


def _fields(result: RubricResult, rubric: Rubric) -> dict[str, Any]:
    doc: dict[str, Any] = {"reward": result.score, "reward_components": dict(result.components),
                           "rubric": rubric.name}
    rationales = dict(result.rationales)
    if result.rationale is not None:
        rationales[""] = result.rationale
    if rationales:
        doc["reward_rationales"] = rationales
    if result.error is not None:
        doc["reward_error"] = result.error
    return doc


def rescore(path_in: str | Path, rubric: Rubric, path_out: str | Path, *,
            level: Literal["step", "episode"] = "step") -> RescoreSummary:
    """Score every step (or every episode) of ``path_in`` with ``rubric``; write ``path_out``."""
    if level not in ("step", "episode"):
        raise ValueError(f"level must be 'step' or 'episode', got {level!r}.")
    if level == "step" and not rubric.per_step:
        raise ValueError(f"rubric '{rubric.name}' scores whole episodes only: use level='episode'.")
    episodes = read_episodes(path_in)
    if rubric.is_async:
        return asyncio.run(_arescore(str(path_in), episodes, rubric, path_out, level))
    return _write(path_out, episodes, rubric, level, _sync_scores(str(path_in), episodes, rubric, level))


def _sync_scores(path: str, episodes: dict[Any, list[tuple[int, dict[str, Any]]]], rubric: Rubric,
                 level: str) -> Iterator[tuple[int, RubricResult]]:
    for rows in episodes.values():
        rubric.reset()
        lineno = rows[0][0]
        try:
            if level == "episode":
                yield lineno, rubric.score_episode([_step(r) for _, r in rows])
                continue
            for lineno, record in rows:
                yield lineno, rubric.score(record["action"], record["observation"])
        except RubricError as exc:
            raise RescoreError(path, lineno, str(exc)) from exc


async def _arescore(path: str, episodes: dict[Any, list[tuple[int, dict[str, Any]]]], rubric: Rubric,
                    path_out: str | Path, level: str) -> RescoreSummary:
    results: list[tuple[int, RubricResult]] = []
    try:
        for rows in episodes.values():
            rubric.reset()
            lineno = rows[0][0]
            try:
                if level == "episode":
                    results.append((lineno, await rubric.ascore_episode([_step(r) for _, r in rows])))
                    continue
                for lineno, record in rows:
                    results.append((lineno, await rubric.ascore(record["action"], record["observation"])))
            except RubricError as exc:
                raise RescoreError(path, lineno, str(exc)) from exc
    finally:
        closer = getattr(rubric, "aclose", None)
        if closer is not None:
            await closer()
    return _write(path_out, episodes, rubric, level, iter(results))


def _step(record: dict[str, Any]) -> Step:
    reward = record.get("reward")
    return Step(record["action"], record["observation"], reward if isinstance(reward, int | float) else None)


def _write(path_out: str | Path, episodes: dict[Any, list[tuple[int, dict[str, Any]]]], rubric: Rubric,
           level: str, scores: Iterator[tuple[int, RubricResult]]) -> RescoreSummary:
    """Write to ``<out>.partial`` and rename at the end: a failed run leaves no half-written output."""
    tmp = Path(f"{path_out}.partial")
    try:
        summary = _write_to(tmp, episodes, rubric, level, scores)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    tmp.replace(path_out)
    return summary


def _write_to(tmp: Path, episodes: dict[Any, list[tuple[int, dict[str, Any]]]], rubric: Rubric,
              level: str, scores: Iterator[tuple[int, RubricResult]]) -> RescoreSummary:
    total, written, fallbacks = 0.0, 0, 0
    lines = sum(len(rows) for rows in episodes.values())
    with open(tmp, "w", encoding="utf-8") as out:
        if level == "episode":
            for eid, rows in episodes.items():
                _, result = next(scores)
                doc = {"episode_id": eid, "steps": len(rows), **_fields(result, rubric)}
                out.write(json.dumps(doc) + "\n")
                total, written, fallbacks = total + result.score, written + 1, fallbacks + (result.error is not None)
        else:
            for rows in episodes.values():
                for _, record in rows:
                    _, result = next(scores)
                    doc = dict(record)
                    doc["previous_reward"] = record.get("reward")
                    doc.update(_fields(result, rubric))
                    out.write(json.dumps(doc) + "\n")
                    total, written = total + result.score, written + 1
                    fallbacks += result.error is not None
    mean = total / written if written and math.isfinite(total) else None
    return RescoreSummary(lines, len(episodes), written, mean, fallbacks)
