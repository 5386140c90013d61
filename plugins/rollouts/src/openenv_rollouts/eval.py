"""``evaluate(env, split="test", k=N)``: play every task of a split N times and report on it.

The episodes run through ``collect``'s machinery (``run_plan``): the same concurrency, provider
choice, retries after a dead server, error budget and durable JSONL, with an ``EvalPlan`` whose
keys are ``<task_id>#<sample>``; ``resume=True`` plays only the (task, sample) pairs not yet in
``<out>/rollouts.jsonl``. The numbers come from the whole file (``evalstats.summarize``), so a
resumed run reports on every episode, not just the last part.

``<out>/`` gets ``rollouts.jsonl``, ``eval.json`` (``openenv.eval/1``), ``tasks.csv`` (one row
per task) and ``index.html`` with charts (``evalreport``). ``compare_runs(a, b)`` pairs two such
directories task by task.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openenv_rollouts.collect import CollectSummary, run_plan
from openenv_rollouts.evalstats import EvalResult, summarize
from openenv_rollouts.plan import EvalPlan, server_tasks
from openenv_rollouts.policies import Policy
from openenv_rollouts.records import EpisodeRecord, read_records

__all__ = ["EvalRun", "evaluate", "evaluate_async", "load_run"]

ROLLOUTS = "rollouts.jsonl"
RESULT = "eval.json"


@dataclass
class EvalRun:
    """The result of ``evaluate``: the numbers, and how the episodes of this invocation went."""

    result: EvalResult
    run: CollectSummary
    out_dir: Path

    def to_json(self) -> dict[str, Any]:
        doc = self.result.to_json()
        doc["run"] = {k: self.run.to_json()[k] for k in ("episodes", "ok", "errors", "skipped", "elapsed_s",
                                                          "episodes_per_s", "steps_per_s", "restarts",
                                                          "budget_spent", "max_errors", "not_started")}
        return doc


async def evaluate_async(
    env: str, *, split: str = "test", k: int = 1, out_dir: Path | str = "eval", policy: str | Policy = "random",
    threshold: float = 1.0, seed: int = 0, concurrency: int = 4, provider: str | None = None,
    base_url: str | None = None, token: str | None = None, max_steps: int = 100, retries: int = 1,
    max_errors: int | None = None, resume: bool = False, transport: str | None = None,
    llm: dict[str, Any] | None = None, on_episode: Callable[[EpisodeRecord], None] | None = None,
    on_start: Callable[[int], None] | None = None, report: bool = True, replicas: int = 1,
    provider_options: dict[str, Any] | None = None, checkpoint_every: int = 0,
) -> EvalRun:
    """Evaluate ``policy`` on every task of ``split``, ``k`` samples each; see the module docstring.
    An episode succeeds when it finished with ``reward >= threshold``."""
    out = Path(out_dir)
    rollouts = out / ROLLOUTS

    async def make(server: Any, written: dict[str, dict[str, Any]]) -> EvalPlan:
        return EvalPlan(await server_tasks(server, split), split=split, k=k, seed=seed)

    summary = await run_plan(env, make, concurrency=concurrency, output=rollouts, policy=policy,
                             provider=provider, base_url=base_url, token=token, max_steps=max_steps,
                             retries=retries, max_errors=max_errors, resume=resume, transport=transport,
                             llm=llm, on_episode=on_episode, on_start=on_start, replicas=replicas,
                             provider_options=provider_options, checkpoint_every=checkpoint_every)
    records = [r for r in read_records(rollouts) if r.get("split") == split]
    result = summarize(records, env=env, split=split, policy=summary.policy, k=k, threshold=threshold)
    run = EvalRun(result, summary, out)
    from openenv_rollouts.evalreport import write_eval
    from openenv_rollouts.report import run_meta

    doc = run.to_json()
    doc["meta"] = run_meta(env=env, policy=summary.policy, seed=seed, provider=base_url or summary.provider,
                           split=split, k=k, max_steps=max_steps, success_threshold=threshold)
    write_eval(doc, records, out, html_report=report)
    return run


def evaluate(env: str, **kwargs: Any) -> EvalRun:
    """Blocking ``evaluate_async`` (from code that has no event loop running)."""
    return asyncio.run(evaluate_async(env, **kwargs))


def load_run(path: Path | str) -> dict[str, Any]:
    """The ``eval.json`` of a run directory (or the file itself), with a clear error if it is not one."""
    from openenv.errors import ConfigError

    p = Path(path)
    target = p / RESULT if p.is_dir() else p
    if not target.exists():
        raise ConfigError(f"{p} is not an eval run: no {RESULT} in it. Give the --output directory of "
                          "`openenv eval` (it holds eval.json and rollouts.jsonl).")
    try:
        doc = json.loads(target.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ConfigError(f"{target}: not JSON ({exc}).") from None
    if not isinstance(doc, dict) or doc.get("schema") != "openenv.eval/1":
        raise ConfigError(f"{target}: not an openenv.eval/1 document.")
    return doc
