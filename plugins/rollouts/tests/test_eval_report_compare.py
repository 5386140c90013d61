"""What ``openenv eval`` writes from its records, and ``openenv eval compare`` on two such runs."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from openenv_rollouts.cli_eval import app
from openenv_rollouts.evalreport import EVAL_CHARTS, compare_runs, write_eval
from openenv_rollouts.evalstats import summarize


def _run(tmp: Path, name: str, solved: dict[str, int], *, k: int = 4, env: str = "e", split: str = "test") -> Path:
    """A run dir whose task ``t`` succeeded ``solved[t]`` times out of ``k``."""
    records = [{"key": f"{t}#{s}", "task_id": t, "status": "ok", "reward": float(s < c),
                "reward_components": {"hit": float(s < c)}} for t, c in solved.items() for s in range(k)]
    res = summarize(records, env=env, split=split, policy="p", k=k, threshold=1.0)
    out = tmp / name
    write_eval(res.to_json(), records, out)
    return out


def test_the_run_directory_has_json_csv_and_a_page_with_charts(tmp_path: Path) -> None:
    out = _run(tmp_path, "a", {"t1": 4, "t2": 1, "t3": 0})
    doc = json.loads((out / "eval.json").read_text())
    assert doc["schema"] == "openenv.eval/1" and doc["pass_at_k"]["1"] == pytest.approx((1 + 0.25 + 0) / 3)
    assert doc["pass_at_k"]["4"] == pytest.approx(2 / 3)
    rows = list(csv.DictReader((out / "tasks.csv").open()))
    assert [(r["task_id"], r["successes"]) for r in rows] == [("t1", "4"), ("t2", "1"), ("t3", "0")]
    page = (out / "index.html").read_text()
    for chart in EVAL_CHARTS:
        assert (out / chart).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and f'src="{chart}"' in page
    assert "pass@4" in page and "hit" in page and "t2" in page


def test_compare_pairs_shared_tasks_and_lists_the_flips(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", {f"t{i}": 0 for i in range(10)} | {"only_a": 4})
    b = _run(tmp_path, "b", {f"t{i}": 4 if i < 6 else 0 for i in range(10)})
    cmp = compare_runs(json.loads((a / "eval.json").read_text()), json.loads((b / "eval.json").read_text()))
    rate = cmp.metrics[0]
    assert cmp.shared == 10 and cmp.only_a == 1 and cmp.only_b == 0
    assert rate.name == "success rate" and rate.diff == pytest.approx(0.6) and 0 < rate.low <= rate.diff <= rate.high
    assert cmp.gained == [f"t{i}" for i in range(6)] and cmp.lost == []
    result = CliRunner().invoke(app, ["compare", str(a), str(b)])
    assert result.exit_code == 0, result.output
    assert "B better" in result.output and "solved in B, not in A (6)" in result.output
    assert "1 tasks only in A" in result.output
    again = CliRunner().invoke(app, ["compare", str(a), str(b), "--json"])
    assert json.loads(again.output) == json.loads(CliRunner().invoke(app, ["compare", str(a), str(b),
                                                                          "--json"]).output)  # seeded


def test_compare_refuses_runs_that_do_not_pair(tmp_path: Path) -> None:
    a = _run(tmp_path, "a", {"t1": 1})
    other_split = _run(tmp_path, "b", {"t1": 1}, split="train")
    disjoint = _run(tmp_path, "c", {"x": 1})
    for target, message in ((other_split, "the runs do not match"), (disjoint, "share no task"),
                            (tmp_path, "is not an eval run")):
        result = CliRunner().invoke(app, ["compare", str(a), str(target)])
        assert result.exit_code == 2 and message in result.output, result.output
