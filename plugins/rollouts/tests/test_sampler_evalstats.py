"""The task samplers and the eval statistics (pass@k, bootstrap, per-task summary), without a server."""

from __future__ import annotations

import json
import math
from itertools import combinations

import pytest

from openenv.errors import ConfigError
from openenv_rollouts.evalstats import bootstrap_mean_ci, pass_at_k, summarize
from openenv_rollouts.sampler import SignalSampler, make_sampler, zero_variance

TASKS = [f"t{i}" for i in range(20)]


def test_pass_at_k_matches_the_definition_by_enumeration() -> None:
    # pass@k = chance that a k-subset of the n samples holds at least one pass
    for n in range(1, 7):
        for c in range(n + 1):
            outcomes = [True] * c + [False] * (n - c)
            for k in range(1, n + 1):
                subsets = list(combinations(outcomes, k))
                exact = sum(any(s) for s in subsets) / len(subsets)
                assert pass_at_k(n, c, k) == pytest.approx(exact)
    assert pass_at_k(200, 3, 100) == pytest.approx(1 - math.comb(197, 100) / math.comb(200, 100))
    with pytest.raises(ValueError, match="1 <= k <= n"):
        pass_at_k(3, 1, 4)


def test_bootstrap_is_seeded_and_brackets_the_mean() -> None:
    diffs = [0.0, 1.0, 1.0, 0.0, 1.0, -1.0, 1.0, 0.0, 1.0, 1.0]
    mean, lo, hi = bootstrap_mean_ci(diffs, seed=3)
    assert mean == pytest.approx(0.5) and lo < mean < hi and lo >= -1 and hi <= 1
    assert bootstrap_mean_ci(diffs, seed=3) == (mean, lo, hi)
    assert bootstrap_mean_ci([2.0] * 5) == (2.0, 2.0, 2.0)


def _rec(task: str, reward: float, status: str = "ok") -> dict:
    return {"key": f"{task}#{reward}", "task_id": task, "status": status, "reward": reward,
            "reward_components": {"a": reward / 2}}


def test_summarize_counts_errors_as_failed_samples() -> None:
    records = [_rec("a", 1.0), _rec("a", 0.0), _rec("a", 1.0), _rec("b", 0.0), _rec("b", 0.0),
               _rec("b", 0.0, status="error")]
    res = summarize(records, env="e", split="test", policy="p", k=3, threshold=1.0)
    assert res.episodes == 6 and res.ok == 5 and res.errors == 1
    assert res.tasks["a"].successes == 2 and res.tasks["a"].samples == 3
    assert res.tasks["b"].samples == 3 and res.tasks["b"].successes == 0 and not res.tasks["b"].solved
    assert res.success_rate == pytest.approx(2 / 6)
    assert res.pass_at[1] == pytest.approx((2 / 3 + 0) / 2)
    assert res.pass_at[3] == pytest.approx(0.5)
    assert res.mean_reward == pytest.approx(2 / 5)
    assert res.component_means == pytest.approx({"a": 0.2})
    doc = json.loads(json.dumps(res.to_json()))
    assert doc["pass_at_k"]["2"] == pytest.approx(res.pass_at[2]) and doc["tasks"][0]["task_id"] == "a"
    with pytest.raises(ValueError, match="no task_id"):
        summarize([{"key": "x", "status": "ok"}], env="e", split=None, policy="p", k=1)


@pytest.mark.parametrize("kind", ["uniform", "weighted", "signal"])
def test_samplers_are_seeded_and_resume_from_json_state(kind: str) -> None:
    opts = {"weights": {"t0": 5.0, "t3": 0.0}} if kind == "weighted" else {}
    a = make_sampler(kind, TASKS, seed=7, group_size=4, **opts)
    b = make_sampler(kind, TASKS, seed=7, group_size=4, **opts)
    first = a.sample(30)
    assert first == b.sample(30) and set(first) <= set(TASKS)
    for tid in first[:10]:
        a.update(tid, [True, True, False, True])
    state = json.loads(json.dumps(a.state_dict()))
    c = make_sampler(kind, TASKS, seed=99, group_size=4, **opts)
    c.load_state_dict(state)
    assert c.sample(40) == a.sample(40)
    if kind == "weighted":
        assert "t3" not in first + c.sample(200)


def test_weighted_follows_its_weights() -> None:
    s = make_sampler("weighted", ["a", "b"], weights={"a": 3.0, "b": 1.0}, seed=1)
    draws = s.sample(4000)
    assert draws.count("a") / 4000 == pytest.approx(0.75, abs=0.03)


def test_signal_prefers_mixed_tasks_and_starves_none() -> None:
    s = SignalSampler(["easy", "hard", "mixed"], group_size=8, seed=0)
    for _ in range(10):
        s.update("easy", [True] * 8)
        s.update("hard", [False] * 8)
        s.update("mixed", [True, False] * 4)
    draws = s.sample(3000)
    share = {t: draws.count(t) / 3000 for t in ("easy", "hard", "mixed")}
    assert share["mixed"] > 0.7  # uniform: a third
    assert share["easy"] > 0.01 and share["hard"] > 0.01  # exploration and the floor keep them alive
    assert s.success_rate("easy") > 0.9 and s.mixed_groups == [0, 0, 10]


def test_sampler_errors_are_clear() -> None:
    with pytest.raises(ConfigError, match="Did you mean 'signal'"):
        make_sampler("signl", TASKS)
    with pytest.raises(ConfigError, match="needs weights"):
        make_sampler("weighted", TASKS)
    with pytest.raises(ConfigError, match="listed twice"):
        make_sampler("uniform", ["a", "b", "a"])
    with pytest.raises(ConfigError, match="at least one task"):
        make_sampler("uniform", [])
    s = make_sampler("signal", TASKS)
    with pytest.raises(ConfigError, match="Did you mean 't1'"):
        s.update("t1x", [True])
    with pytest.raises(ConfigError, match="same --sampler"):
        make_sampler("uniform", TASKS).load_state_dict(s.state_dict())
    assert zero_variance([True, True]) and zero_variance([]) and not zero_variance([True, False])


def test_trl_rows_keep_a_prompts_completions_in_one_group() -> None:
    from openenv_rollouts.trl import reset_kwargs, task_rows

    rows = task_rows(["a", "b"], prompt=lambda t: [{"role": "user", "content": f"play {t}"}])
    assert [r["task_id"] for r in rows] == ["a", "b"] and rows[0]["group_id"] != rows[1]["group_id"]
    assert reset_kwargs(rows[0]) == {"task_id": "a", "group_id": rows[0]["group_id"]}  # prompt left out
    # a row without a group_id: identical rows (one prompt's completions) get one group, other prompts another
    row = {"prompt": "p1", "task_id": "a", "seed": 3}
    first, again = reset_kwargs(dict(row)), reset_kwargs(dict(row))
    assert first == again and first["group_id"].startswith("trl-a-") and first["seed"] == 3
    assert reset_kwargs({**row, "prompt": "p2"})["group_id"] != first["group_id"]
    assert reset_kwargs({"prompt": "x", "seed": 1}) == {"seed": 1}  # no task: no group
