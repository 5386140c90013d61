"""The collect and eval report pages: run metadata, Wilson intervals, components, tasks, data links.

The pages are parsed (``html.parser``), not screenshotted: each table is read back by its class."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from pathlib import Path

import pytest

from openenv_rollouts.evalreport import write_eval
from openenv_rollouts.evalstats import summarize
from openenv_rollouts.records import EpisodeRecord, RolloutWriter
from openenv_rollouts.report import CHARTS, run_meta, wilson_interval, write_report


class _Page(HTMLParser):
    """Tables by class (rows of cell texts) and the hrefs of links."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.hrefs: list[str] = []
        self.imgs: list[str] = []
        self._table: list[list[str]] | None = None
        self._cell: list[str] | None = None
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table":
            self._table = self.tables.setdefault(a.get("class") or f"t{len(self.tables)}", [])
        elif tag == "tr" and self._table is not None:
            self._table.append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "a":
            self.hrefs.append(a["href"] or "")
        elif tag == "img":
            self.imgs.append(a["src"] or "")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._table is not None:
            self._table[-1].append("".join(self._cell))
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def test_wilson_interval_matches_a_hand_computation() -> None:
    # 7 of 10 at 95 %: z = 1.959964, z^2 = 3.841459; centre = (0.7 + z^2/20) / (1 + z^2/10) = 0.644489,
    # half = z / (1 + z^2/10) * sqrt(0.7 * 0.3 / 10 + z^2 / 400) = 0.247715.
    low, high = wilson_interval(7, 10)
    assert low == pytest.approx(0.644489 - 0.247715, abs=1e-5) and high == pytest.approx(0.644489 + 0.247715, abs=1e-5)
    # 0 of 10: the interval is not zero-width (the normal approximation would say [0, 0]).
    assert wilson_interval(0, 10) == pytest.approx((0.0, 3.841459 / 13.841459), abs=1e-6)
    assert wilson_interval(10, 10)[1] == 1.0 and wilson_interval(0, 0) == (0.0, 1.0)
    assert wilson_interval(7, 10, 0.99)[0] < low  # a higher level, a wider interval
    with pytest.raises(ValueError, match="successes <= n"):
        wilson_interval(11, 10)


def test_run_meta_names_the_run_and_masks_credentials() -> None:
    meta = run_meta(env="no.such:Env", policy="llm", seed=3, provider=None, episodes=10,
                    argv=["/venv/bin/openenv", "collect", "x", "--llm-api-key", "sk-secret", "--token=abc", "-n", "10"])
    assert meta["command"] == "openenv collect x --llm-api-key REDACTED --token=REDACTED -n 10"
    assert "sk-secret" not in json.dumps(meta) and "abc" not in meta["command"]
    assert (meta["env"], meta["policy"], meta["seed"], meta["provider"], meta["episodes"]) == ("no.such:Env", "llm",
                                                                                                3, "local", 10)
    assert meta["env_version"] is None and meta["date"].endswith("+00:00")


def _records(path: Path) -> None:
    """10 episodes over tasks a and b: 7 succeed (reward 1), 2 finish truncated with reward 0, 1 errors."""
    with RolloutWriter(path, append=False) as writer:
        for i in range(10):
            status = "error" if i == 9 else "ok"
            reward = 1.0 if i < 7 else 0.0
            writer.write(EpisodeRecord(key=f"ep-{i:06d}", episode=i, env="fake", policy="first", seed=i, task={},
                                       task_id="a" if i % 2 == 0 else "b", status=status, reward=reward,
                                       reward_components={"goal": reward, "step": -0.1}, done=i < 7,
                                       truncated=i in (7, 8)))


def test_collect_report_has_metadata_rates_components_tasks_and_links(tmp_path: Path) -> None:
    data = tmp_path / "runs" / "r.jsonl"
    data.parent.mkdir()
    _records(data)
    parquet = data.with_suffix(".parquet")
    parquet.write_bytes(b"PAR1")
    meta = run_meta(env="fake", policy="first", seed=0, provider="docker", argv=["openenv", "collect", "fake"])
    page = write_report(data, tmp_path / "report", meta=meta, data={"Parquet": parquet, "CSV": tmp_path / "none.csv"})
    parsed = _Page(page.read_text())

    fields = dict(row for row in parsed.tables["meta"][1:])
    assert fields["policy"] == "first" and fields["seed"] == "0" and fields["provider"] == "docker"
    assert fields["command"] == "openenv collect fake" and fields["date"] == meta["date"]

    rates = {row[0].split(" ")[0]: row[1:] for row in parsed.tables["rates"][1:]}
    assert parsed.tables["rates"][0][-1] == "95% CI (Wilson)"
    assert rates["success"] == ["7", "10", "0.7", "[0.397, 0.892]"]
    assert rates["truncated"][:3] == ["2", "9", "0.2222"]  # of the 9 finished episodes
    assert rates["errored"][:2] == ["1", "10"]

    comps = {row[0]: row[1:] for row in parsed.tables["components"][1:]}
    assert comps["goal"][0] == "0.7778" and comps["step"][0] == "-0.1" and comps["goal"][-1] == "9"

    tasks = {row[0]: row[1:] for row in parsed.tables["tasks"][1:]}
    # a: episodes 0 2 4 6 8 -> 4 successes of 5; b: 1 3 5 7 9 -> 3 of 5, 9 errored.
    lo, hi = wilson_interval(4, 5)
    assert tasks["a"] == ["5", "0", "4", "0.8", f"[{lo:.3f}, {hi:.3f}]", "0.8"]
    assert tasks["b"][:4] == ["5", "1", "3", "0.6"] and tasks["b"][-1] == "0.75"

    # Relative links that resolve from the page's folder; the CSV was not written, so it is not linked.
    assert parsed.hrefs == ["../runs/r.jsonl", "../runs/r.parquet"]
    assert all((page.parent / h).resolve() in (data.resolve(), parquet.resolve()) for h in parsed.hrefs)
    assert parsed.imgs == list(CHARTS) and all((page.parent / c).read_bytes()[:4] == b"\x89PNG" for c in CHARTS)
    assert "mean of last" not in page.read_text()  # no running mean that reads as a learning curve


def test_collect_report_without_tasks_or_meta_falls_back_to_the_records(tmp_path: Path) -> None:
    data = tmp_path / "r.jsonl"
    with RolloutWriter(data, append=False) as writer:
        writer.write(EpisodeRecord(key="ep-000000", episode=0, env="fake", policy="cycle", seed=5, task={}, reward=0.5))
    parsed = _Page(write_report(data, tmp_path / "rep").read_text())
    assert dict(row for row in parsed.tables["meta"][1:]) == {"env": "fake", "policy": "cycle", "seed": "5"}
    assert "tasks" not in parsed.tables and parsed.hrefs == ["../r.jsonl"]


def test_eval_report_has_metadata_intervals_and_links(tmp_path: Path) -> None:
    out = tmp_path / "eval"
    out.mkdir()
    _records(out / "rollouts.jsonl")
    records = [json.loads(line) for line in (out / "rollouts.jsonl").read_text().splitlines()]
    doc = summarize(records, env="fake", split="test", policy="first", k=5).to_json()
    doc["meta"] = run_meta(env="fake", policy="first", seed=0, provider=None, argv=["openenv", "eval", "fake"])
    write_eval(doc, records, out)
    parsed = _Page((out / "index.html").read_text())
    assert dict(row for row in parsed.tables["meta"][1:])["command"] == "openenv eval fake"
    assert json.loads((out / "eval.json").read_text())["meta"]["policy"] == "first"
    rates = {row[0].split(" ")[0]: row[1:] for row in parsed.tables["rates"][1:]}
    assert rates["success"] == ["7", "10", "0.7", "[0.397, 0.892]"]
    tasks = {row[0]: row[1:] for row in parsed.tables["tasks"][1:]}
    lo, hi = wilson_interval(3, 5)
    assert tasks["b"][:5] == ["5", "3", "1", "0.6", f"[{lo:.3f}, {hi:.3f}]"]
    assert parsed.hrefs == ["rollouts.jsonl", "tasks.csv", "eval.json"]
    assert "goal" in {row[0] for row in parsed.tables["components"]}
