"""What ``openenv eval`` writes (``eval.json``, ``tasks.csv``, ``index.html`` with charts) and
``compare_runs``: two runs paired task by task, with seeded bootstrap intervals and flipped tasks."""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openenv.errors import ConfigError
from openenv_rollouts.evalstats import bootstrap_mean_ci
from openenv_rollouts.report import (
    CONFIDENCE,
    RATE_HEAD,
    components_chart,
    components_table,
    figure,
    html_page,
    html_table,
    links_html,
    meta_html,
    rate_row,
    save_figure,
    wilson_interval,
)

__all__ = ["EVAL_CHARTS", "Comparison", "compare_runs", "write_eval"]

EVAL_CHARTS = ("task_success.png", "pass_at_k.png", "reward_hist.png", "reward_components.png")


def _atomic_write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_eval(doc: dict[str, Any], records: Sequence[dict[str, Any]], out: Path, *,
               html_report: bool = True) -> None:
    """``eval.json`` (``doc``), ``tasks.csv`` and, unless disabled, ``index.html`` with its charts."""
    out.mkdir(parents=True, exist_ok=True)
    _atomic_write(out / "eval.json", json.dumps(doc, indent=1) + "\n")
    with (out / "tasks.csv").open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["task_id", "samples", "successes", "errors", "success_rate", "mean_reward"])
        for t in doc["tasks"]:
            writer.writerow([t["task_id"], t["samples"], t["successes"], t["errors"], t["success_rate"],
                             "" if t["mean_reward"] is None else t["mean_reward"]])
    if html_report:
        _write_html(doc, records, out)


def _write_html(doc: dict[str, Any], records: Sequence[dict[str, Any]], out: Path) -> None:
    tasks = sorted(doc["tasks"], key=lambda t: (-t["success_rate"], t["task_id"]))
    fig, ax = figure()
    ax.bar(range(len(tasks)), [t["success_rate"] for t in tasks], color="#3b7dd8")
    ax.set(title=f"{doc['env']} / {doc['split']}: success rate per task (sorted)", xlabel="task",
           ylabel="success rate", ylim=(0, 1.05))
    save_figure(fig, out / EVAL_CHARTS[0])

    fig, ax = figure()
    ks = [int(k) for k in doc["pass_at_k"]]
    ax.plot(ks, [doc["pass_at_k"][str(k)] for k in ks], "o-", color="#d8643b")
    ax.set(title="pass@k (unbiased estimator)", xlabel="k", ylabel="pass@k", ylim=(0, 1.05), xticks=ks)
    save_figure(fig, out / EVAL_CHARTS[1])

    ok = [r for r in records if r.get("status") == "ok"]
    rewards = [float(r.get("reward") or 0.0) for r in ok]
    fig, ax = figure()
    ax.hist(rewards or [0.0], bins=min(30, max(5, len(set(rewards)))), color="#4caf50", edgecolor="white")
    ax.set(title="episode reward", xlabel="reward", ylabel="episodes")
    save_figure(fig, out / EVAL_CHARTS[2])

    comps: dict[str, list[float]] = {}
    for r in ok:
        for name, value in (r.get("reward_components") or {}).items():
            comps.setdefault(str(name), []).append(float(value))
    components_chart(comps, out / EVAL_CHARTS[3], f"{doc['env']} / {doc['split']}: reward by component")

    meta = doc.get("meta") or {"env": doc["env"], "policy": doc["policy"]}
    summary = html_table([(k, doc[k]) for k in ("episodes", "ok", "errors", "mean_reward", "threshold", "k")],
                         cls="summary")
    successes = sum(t["successes"] for t in doc["tasks"])
    truncated = sum(bool(r.get("truncated")) for r in ok)
    rates = html_table([
        rate_row(f"success (reward >= {doc['threshold']:g}; errors count as failures)", successes, doc["episodes"]),
        rate_row("truncated (of finished episodes)", truncated, len(ok)),
        rate_row("errored", doc["errors"], doc["episodes"])], RATE_HEAD, cls="rates")
    passk = html_table([(f"pass@{k}", v) for k, v in doc["pass_at_k"].items()])
    per_task = []
    for t in tasks:
        low, high = wilson_interval(t["successes"], t["samples"])
        per_task.append((t["task_id"], t["samples"], t["successes"], t["errors"], t["success_rate"],
                         f"[{low:.3f}, {high:.3f}]", t["mean_reward"]))
    task_table = html_table(per_task, ["task", "samples", "successes", "errors", "success rate",
                                       f"{CONFIDENCE:.0%} CI (Wilson)", "mean reward"], cls="tasks")
    images = "".join(f'<figure><img src="{n}" alt="{n[:-4]}"></figure>' for n in EVAL_CHARTS)
    body = (meta_html(meta)
            + links_html(out, {"rollouts (JSONL)": out / "rollouts.jsonl", "per-task results (CSV)": out / "tasks.csv",
                               "numbers (JSON)": out / "eval.json"})
            + f"<h2>summary</h2>{summary}<h2>rates</h2>{rates}<h2>pass@k</h2>{passk}"
            + f"<h2>reward by component</h2>{components_table(comps)}{images}<h2>tasks</h2>{task_table}")
    (out / "index.html").write_text(html_page(f"eval: {doc['env']} / {doc['split']}", body), encoding="utf-8")


@dataclass
class Metric:
    """B minus A over the shared tasks: the mean difference and its bootstrap interval."""

    name: str
    a: float
    b: float
    diff: float
    low: float
    high: float


@dataclass
class Comparison:
    """``compare_runs``' answer."""

    env: str
    split: str | None
    a: str
    b: str
    shared: int
    only_a: int
    only_b: int
    metrics: list[Metric] = field(default_factory=list)
    #: Solved (a sample succeeded) in B, not in A: what B gained.
    gained: list[str] = field(default_factory=list)
    #: Solved in A, not in B: what B lost.
    lost: list[str] = field(default_factory=list)
    confidence: float = 0.95

    def to_json(self) -> dict[str, Any]:
        return {"schema": "openenv.eval-compare/1", "env": self.env, "split": self.split, "a": self.a, "b": self.b,
                "shared_tasks": self.shared, "only_a": self.only_a, "only_b": self.only_b,
                "confidence": self.confidence,
                "metrics": [m.__dict__ for m in self.metrics], "gained": self.gained, "lost": self.lost}


def compare_runs(a: dict[str, Any], b: dict[str, Any], *, names: tuple[str, str] = ("A", "B"),
                 resamples: int = 2000, seed: int = 0, confidence: float = 0.95) -> Comparison:
    """Pair two ``eval.json`` documents over the tasks both played.

    Per task, the success rate and the mean reward of B minus A; the interval resamples tasks
    (seeded, so the same runs give the same interval). Runs of different envs or splits, or with
    no task in common, are refused: their numbers do not pair."""
    if a["env"] != b["env"] or a.get("split") != b.get("split"):
        raise ConfigError(f"the runs do not match: {names[0]} is {a['env']}/{a.get('split')}, {names[1]} is "
                          f"{b['env']}/{b.get('split')}; compare two evals of the same env and split.")
    ta = {t["task_id"]: t for t in a["tasks"]}
    tb = {t["task_id"]: t for t in b["tasks"]}
    shared = sorted(set(ta) & set(tb))
    if not shared:
        raise ConfigError(f"the runs share no task ({len(ta)} tasks in {names[0]}, {len(tb)} in {names[1]}); "
                          "they cannot be paired.")
    cmp = Comparison(env=a["env"], split=a.get("split"), a=names[0], b=names[1], shared=len(shared),
                     only_a=len(set(ta) - set(tb)), only_b=len(set(tb) - set(ta)), confidence=confidence)
    for name, key in (("success rate", "success_rate"), ("mean reward", "mean_reward")):
        pairs = [(ta[t][key], tb[t][key]) for t in shared if ta[t][key] is not None and tb[t][key] is not None]
        if not pairs:
            continue
        diffs = [y - x for x, y in pairs]
        mean, lo, hi = bootstrap_mean_ci(diffs, resamples=resamples, seed=seed, confidence=confidence)
        cmp.metrics.append(Metric(name, sum(x for x, _ in pairs) / len(pairs), sum(y for _, y in pairs) / len(pairs),
                                  mean, lo, hi))
    cmp.gained = [t for t in shared if tb[t]["successes"] > 0 and ta[t]["successes"] == 0]
    cmp.lost = [t for t in shared if ta[t]["successes"] > 0 and tb[t]["successes"] == 0]
    return cmp
