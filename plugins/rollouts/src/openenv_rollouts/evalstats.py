"""The numbers of an eval: pass@k, per-task results, and a paired bootstrap between two runs.

Pure functions over rollout records (``openenv.rollout/1`` or ``/2`` dicts, as ``read_records``
gives them); ``openenv_rollouts.eval`` plays the episodes and writes what these compute.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["EvalResult", "TaskResult", "bootstrap_mean_ci", "pass_at_k", "summarize"]


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased pass@k estimate from ``n`` samples of which ``c`` passed: ``1 - C(n-c, k) / C(n, k)``.

    The chance that at least one of ``k`` samples drawn without replacement from the ``n`` passes
    (Chen et al., 2021). Computed as a product, so large ``n`` neither overflows nor loses precision.
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}.")
    if n - c < k:
        return 1.0
    # C(n-c, k) / C(n, k) = prod_{i=n-c+1}^{n} (1 - k / i)
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def bootstrap_mean_ci(diffs: Sequence[float], *, resamples: int = 2000, confidence: float = 0.95,
                      seed: int = 0) -> tuple[float, float, float]:
    """The mean of ``diffs`` and its percentile bootstrap confidence interval ``(mean, low, high)``.

    Resamples the items (tasks) with replacement ``resamples`` times with a seeded RNG, so the same
    inputs give the same interval."""
    if not diffs:
        raise ValueError("bootstrap_mean_ci needs at least one value.")
    n = len(diffs)
    mean = math.fsum(diffs) / n
    rng = random.Random(seed)
    means = sorted(math.fsum(diffs[rng.randrange(n)] for _ in range(n)) / n for _ in range(resamples))
    alpha = (1.0 - confidence) / 2.0
    lo = means[max(0, math.floor(alpha * resamples))]
    hi = means[min(resamples - 1, math.ceil((1.0 - alpha) * resamples) - 1)]
    return mean, lo, hi


@dataclass
class TaskResult:
    """One task's samples."""

    task_id: str
    samples: int = 0
    successes: int = 0
    errors: int = 0
    mean_reward: float | None = None
    rewards: list[float] = field(default_factory=list)

    @property
    def success_rate(self) -> float:
        return self.successes / self.samples if self.samples else 0.0

    @property
    def solved(self) -> bool:
        """At least one sample succeeded (what ``eval compare`` calls solved)."""
        return self.successes > 0


@dataclass
class EvalResult:
    """What ``openenv eval`` reports (``to_json`` is the ``eval.json`` document)."""

    env: str
    split: str | None
    policy: str
    k: int
    threshold: float
    episodes: int = 0
    ok: int = 0
    errors: int = 0
    mean_reward: float | None = None
    success_rate: float | None = None
    pass_at: dict[int, float] = field(default_factory=dict)
    component_means: dict[str, float] = field(default_factory=dict)
    tasks: dict[str, TaskResult] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": "openenv.eval/1", "env": self.env, "split": self.split, "policy": self.policy, "k": self.k,
            "threshold": self.threshold, "episodes": self.episodes, "ok": self.ok, "errors": self.errors,
            "mean_reward": self.mean_reward, "success_rate": self.success_rate,
            "pass_at_k": {str(k): v for k, v in sorted(self.pass_at.items())},
            "component_means": self.component_means,
            "tasks": [{**{k: v for k, v in asdict(t).items() if k != "rewards"}, "success_rate": t.success_rate}
                      for t in self.tasks.values()],
        }


def _task_of(record: dict[str, Any]) -> str:
    tid = record.get("task_id")
    if tid is None:
        raise ValueError(f"record {record.get('key')!r} has no task_id; `openenv eval` runs write one per record.")
    return str(tid)


def summarize(records: Iterable[dict[str, Any]], *, env: str, split: str | None, policy: str, k: int,
              threshold: float = 1.0) -> EvalResult:
    """Aggregate eval records. An episode succeeds when it finished (``status: ok``) with
    ``reward >= threshold``; an errored episode counts as a failed sample (it stays in pass@k's
    ``n``), so a flaky policy cannot look better by erroring. pass@k for each ``k' <= k`` is the
    mean over tasks of the unbiased estimate with that task's own ``n`` (tasks with fewer than
    ``k'`` samples, an interrupted run, are left out of that ``k'``)."""
    result = EvalResult(env=env, split=split, policy=policy, k=k, threshold=threshold)
    comp_sums: dict[str, float] = {}
    ok_rewards: list[float] = []
    for r in records:
        tid = _task_of(r)
        task = result.tasks.get(tid)
        if task is None:
            task = result.tasks[tid] = TaskResult(tid)
        task.samples += 1
        result.episodes += 1
        if r.get("status") != "ok":
            task.errors += 1
            result.errors += 1
            continue
        result.ok += 1
        reward = float(r.get("reward") or 0.0)
        task.rewards.append(reward)
        ok_rewards.append(reward)
        task.successes += reward >= threshold
        for name, value in (r.get("reward_components") or {}).items():
            comp_sums[name] = comp_sums.get(name, 0.0) + float(value)
    for task in result.tasks.values():
        task.mean_reward = math.fsum(task.rewards) / len(task.rewards) if task.rewards else None
    result.tasks = dict(sorted(result.tasks.items()))
    if ok_rewards:
        result.mean_reward = math.fsum(ok_rewards) / len(ok_rewards)
        result.component_means = {name: v / len(ok_rewards) for name, v in sorted(comp_sums.items())}
    if result.episodes:
        result.success_rate = sum(t.successes for t in result.tasks.values()) / result.episodes
    for kk in range(1, k + 1):
        estimates = [pass_at_k(t.samples, t.successes, kk) for t in result.tasks.values() if t.samples >= kk]
        if estimates:
            result.pass_at[kk] = math.fsum(estimates) / len(estimates)
    return result
