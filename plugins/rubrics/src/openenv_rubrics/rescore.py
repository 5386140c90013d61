"""Re-score stored rollouts with another rubric, so a reward change needs no new rollouts.

Input (``openenv_rubrics.rollout_files``): an ``openenv.rollout/1`` (or ``/2``) file written by ``openenv
collect`` (one episode per line), or the step-per-line JSONL::

    {"episode_id": "ep-1", "step": 0, "action": {...}, "observation": {...}, "reward": 0.5}

Each action is scored with the observation that followed it. Output, ``level="step"``:

* an ``openenv.rollout/1`` (``/2``) input gives records of the same version, one per input record, with
  each step's ``reward`` and ``components`` replaced by the rubric's (the components as a server
  sends them: the rubric's name, then its children with dotted names), ``previous_reward`` (and
  ``reward_rationales`` / ``reward_error`` when present) added to the step, the episode's
  ``reward`` / ``reward_components`` recomputed as the sums over its steps, and
  ``"rescored": {"rubric", "previous_reward", "previous_reward_components"}`` added;
* step lines give every input line, in episode order, with ``reward`` replaced by the new score
  and ``previous_reward``, ``reward_components`` (and ``reward_rationales`` / ``reward_error``
  when present) and ``rubric`` added.

``level="episode"``: one line per episode, ``{"episode_id", "steps", "reward",
"reward_components", "rubric"}`` (plus ``previous_reward``, the record's ``reward``, for an
``openenv.rollout/1`` input, whose episodes without steps are skipped and counted).

The rubric's ``reset()`` runs before each episode. A rubric fault stops the run with the line it
happened on (declare ``on_error="fallback"`` on the rubric to score through faults; those steps
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

from openenv.rubric import Rubric, RubricError, RubricResult, components_of
from openenv_rubrics.rollout_files import Episode, Format, RescoreError, read_episodes, read_rollouts

__all__ = ["RescoreError", "RescoreSummary", "read_episodes", "rescore"]

# Per episode, (line, result) per step, or one (line, result) for the episode; None: skipped.
_Scores = list[list[tuple[int, RubricResult]] | None]


@dataclass
class RescoreSummary:
    """What a re-scoring run did."""

    lines: int
    episodes: int
    written: int
    mean_reward: float | None
    fallbacks: int
    #: Episodes with no steps (an ``openenv.rollout/1`` run's failed attempts) not scored at ``--episode``.
    skipped: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"lines": self.lines, "episodes": self.episodes, "written": self.written,
                "mean_reward": self.mean_reward, "fallbacks": self.fallbacks, "skipped": self.skipped}


def rescore(path_in: str | Path, rubric: Rubric, path_out: str | Path, *,
            level: Literal["step", "episode"] = "step") -> RescoreSummary:
    """Score every step (or every episode) of ``path_in`` with ``rubric``; write ``path_out``."""
    if level not in ("step", "episode"):
        raise ValueError(f"level must be 'step' or 'episode', got {level!r}.")
    if level == "step" and not rubric.per_step:
        raise ValueError(f"rubric '{rubric.name}' scores whole episodes only: use level='episode'.")
    fmt, episodes = read_rollouts(path_in)
    if rubric.is_async:
        scores = asyncio.run(_ascores(str(path_in), episodes, rubric, level))
    else:
        scores = list(_sync_scores(str(path_in), episodes, rubric, level))
    return _write(path_out, fmt, episodes, rubric, level, scores)


def _sync_scores(path: str, episodes: list[Episode], rubric: Rubric,
                 level: str) -> Iterator[list[tuple[int, RubricResult]] | None]:
    for ep in episodes:
        if level == "episode" and not ep.steps:
            yield None
            continue
        rubric.reset()
        lineno = ep.line
        try:
            if level == "episode":
                yield [(lineno, rubric.score_episode(ep.steps))]
                continue
            out = []
            for lineno, step in zip(ep.lines, ep.steps, strict=True):
                out.append((lineno, rubric.score(step.action, step.observation)))
            yield out
        except RubricError as exc:
            raise RescoreError(path, lineno, _where(ep, exc)) from exc


async def _ascores(path: str, episodes: list[Episode], rubric: Rubric, level: str) -> _Scores:
    scores: _Scores = []
    try:
        for ep in episodes:
            if level == "episode" and not ep.steps:
                scores.append(None)
                continue
            rubric.reset()
            lineno = ep.line
            try:
                if level == "episode":
                    scores.append([(lineno, await rubric.ascore_episode(ep.steps))])
                    continue
                out = []
                for lineno, step in zip(ep.lines, ep.steps, strict=True):
                    out.append((lineno, await rubric.ascore(step.action, step.observation)))
                scores.append(out)
            except RubricError as exc:
                raise RescoreError(path, lineno, _where(ep, exc)) from exc
    finally:
        closer = getattr(rubric, "aclose", None)
        if closer is not None:
            await closer()
    return scores


def _where(ep: Episode, exc: RubricError) -> str:
    return f"episode {ep.id!r}: {exc}" if ep.record is not None else str(exc)


def _fields(result: RubricResult, rubric: Rubric) -> dict[str, Any]:
    doc: dict[str, Any] = {"reward": result.score, "reward_components": dict(result.components),
                           "rubric": rubric.name}
    doc.update(_notes(result))
    return doc


def _notes(result: RubricResult) -> dict[str, Any]:
    doc: dict[str, Any] = {}
    rationales = dict(result.rationales)
    if result.rationale is not None:
        rationales[""] = result.rationale
    if rationales:
        doc["reward_rationales"] = rationales
    if result.error is not None:
        doc["reward_error"] = result.error
    return doc


def _write(path_out: str | Path, fmt: Format, episodes: list[Episode], rubric: Rubric, level: str,
           scores: _Scores) -> RescoreSummary:
    """Write to ``<out>.partial`` and rename at the end: a failed run leaves no half-written output."""
    tmp = Path(f"{path_out}.partial")
    try:
        summary = _write_to(tmp, fmt, episodes, rubric, level, scores)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    tmp.replace(path_out)
    return summary


def _write_to(tmp: Path, fmt: Format, episodes: list[Episode], rubric: Rubric, level: str,
              scores: _Scores) -> RescoreSummary:
    written: list[RubricResult] = []
    skipped = 0
    with open(tmp, "w", encoding="utf-8") as out:
        for ep, results in zip(episodes, scores, strict=True):
            if results is None:
                skipped += 1
                continue
            written.extend(r for _, r in results)
            if level == "episode":
                doc = {"episode_id": ep.id, "steps": len(ep.steps), **_fields(results[0][1], rubric)}
                if ep.record is not None:
                    doc["previous_reward"] = ep.record.get("reward")
                out.write(json.dumps(doc) + "\n")
            elif ep.record is not None:
                out.write(json.dumps(_rescored_record(ep.record, [r for _, r in results], rubric)) + "\n")
            else:
                for record, (_, result) in zip(ep.rows, results, strict=True):
                    doc = dict(record)
                    doc["previous_reward"] = record.get("reward")
                    doc.update(_fields(result, rubric))
                    out.write(json.dumps(doc) + "\n")
    total = math.fsum(r.score for r in written)
    mean = total / len(written) if written and math.isfinite(total) else None
    lines = sum(1 if ep.record is not None else len(ep.rows) for ep in episodes)
    fallbacks = sum(r.error is not None for r in written)
    return RescoreSummary(lines, len(episodes), len(written), mean, fallbacks, skipped)


def _rescored_record(record: dict[str, Any], results: list[RubricResult], rubric: Rubric) -> dict[str, Any]:
    """An ``openenv.rollout/1`` record with the rubric's step rewards and the episode's sums."""
    doc = dict(record)
    steps: list[dict[str, Any]] = []
    sums: dict[str, float] = {}
    for step, result in zip(record["steps"], results, strict=True):
        components = components_of({rubric.name: result})[0]
        new = {**step, "reward": result.score, "components": components,
               "previous_reward": step.get("reward"), **_notes(result)}
        steps.append(new)
        for name, value in components.items():
            sums[name] = sums.get(name, 0.0) + value
    doc["steps"] = steps
    doc["reward"] = math.fsum(r.score for r in results)
    doc["reward_components"] = sums
    doc["rescored"] = {"rubric": rubric.name, "previous_reward": record.get("reward"),
                       "previous_reward_components": record.get("reward_components")}
    return doc
