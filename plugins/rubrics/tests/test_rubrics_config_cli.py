"""Rubrics from text (NAME[=CONFIG]), the registry, re-scoring, and the ``openenv rubrics`` CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from openenv.errors import ConfigError, UnknownNameError
from openenv.plugins import PluginManager
from openenv.rubric import RubricError
from openenv_rubrics.builtin import ExactMatch
from openenv_rubrics.config import build_rubric, parse_config, parse_spec, rubric_from_spec
from openenv_rubrics.plugin import RUBRICS
from openenv_rubrics.rescore import RescoreError, rescore
from openenv_rubrics.testing import FakeChatServer, Reply


def test_parse_spec_forms() -> None:
    assert parse_spec("exact_match") == ("exact_match", {})
    assert parse_spec('exact_match={"expected": "a,b"}') == ("exact_match", {"expected": "a,b"})
    assert parse_spec("numeric_match=expected=4,abs_tol=0.01,extract=last") == (
        "numeric_match", {"expected": 4, "abs_tol": 0.01, "extract": "last"})
    assert parse_config("flag=true,none=null,text=hello world") == {"flag": True, "none": None, "text": "hello world"}
    with pytest.raises(ConfigError, match="not valid JSON"):
        parse_spec("x={bad")
    with pytest.raises(ConfigError, match="not 'key=value'"):
        parse_spec("x=a,b")
    with pytest.raises(ConfigError, match="sets 'a' twice"):
        parse_spec("x=a=1,a=2")
    with pytest.raises(ConfigError, match="must start with a rubric name"):
        parse_spec("=x")


def test_every_registered_rubric_loads_lazily_and_is_a_rubric(rubrics_only: PluginManager) -> None:
    from openenv.rubric import Rubric

    registry = rubrics_only.catalog.rubrics
    assert registry.names() == sorted(RUBRICS)
    for entry in registry:
        assert entry.plugin == "rubrics" and entry.description
        assert issubclass(entry.load(), Rubric), entry.name


def test_build_rubric_names_and_options() -> None:
    rubric = build_rubric("exact_match", {"expected": "4"})
    assert isinstance(rubric, ExactMatch) and rubric.name == "exact_match"
    assert build_rubric("exact_match", {"expected": "4", "name": "answer"}).name == "answer"
    with pytest.raises(UnknownNameError, match=r"Unknown rubric 'exact_mach'\. Did you mean 'exact_match'\?"):
        build_rubric("exact_mach", {})
    with pytest.raises(ConfigError, match=r"has no option 'expectd'\. Did you mean 'expected'\?"):
        build_rubric("exact_match", {"expectd": "4"})
    with pytest.raises(ConfigError, match="exactly one of expected"):
        build_rubric("exact_match", {})
    best = rubric_from_spec('max={"rubrics": ["exact_match=expected=4", "regex=pattern=\\\\d{2}"]}')
    assert best.score("4", None).score == 1.0
    assert best.score("42", None).components == {"exact_match": 0.0, "regex": 1.0}
    assert best.score("x", None).score == 0.0


def test_composite_from_text_spec() -> None:
    spec = json.dumps({"rubrics": [
        {"rubric": "regex", "config": {"pattern": "\\d+"}, "name": "format"},
        {"rubric": "numeric_match", "config": {"target": "observation.answer"}},
    ]})
    chain = rubric_from_spec(f"sequential={spec}")
    assert chain.score("42", {"answer": 42}).score == 1.0
    assert chain.score("forty-two", {"answer": 42}).to_json()["components"] == {"format": 0.0}


def _write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


ROLLOUT = [
    {"episode_id": "a", "step": 0, "action": {"message": "4"}, "observation": {"answer": "4"}, "reward": 0.1},
    {"episode_id": "b", "step": 0, "action": {"message": "x"}, "observation": {"answer": "7"}, "reward": 0.2},
    {"episode_id": "a", "step": 1, "action": {"message": "5"}, "observation": {"answer": "4"}, "reward": 0.3,
     "done": True},
]


def test_rescore_steps_and_episodes(tmp_path: Path) -> None:
    src = _write(tmp_path / "in.jsonl", ROLLOUT)
    rubric = build_rubric("exact_match", {"response": "action.message", "target": "observation.answer"})
    summary = rescore(src, rubric, tmp_path / "out.jsonl")
    assert summary.to_json() == {"lines": 3, "episodes": 2, "written": 3, "mean_reward": pytest.approx(1 / 3),
                                 "fallbacks": 0, "skipped": 0}
    out = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [(o["episode_id"], o["step"], o["reward"], o["previous_reward"]) for o in out] == [
        ("a", 0, 1.0, 0.1), ("a", 1, 0.0, 0.3), ("b", 0, 0.0, 0.2)]
    assert out[1]["done"] is True and out[0]["rubric"] == "exact_match" and out[0]["reward_components"] == {}
    episodes = rescore(src, build_rubric("discounted_return", {"gamma": 0.5}), tmp_path / "ep.jsonl", level="episode")
    assert episodes.written == 2
    rows = [json.loads(line) for line in (tmp_path / "ep.jsonl").read_text().splitlines()]
    assert rows[0]["episode_id"] == "a" and rows[0]["steps"] == 2 and rows[0]["reward"] == pytest.approx(0.25)


def test_rescore_errors_name_the_line(tmp_path: Path) -> None:
    rubric = build_rubric("exact_match", {"response": "action.message", "target": "observation.answer"})
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(ROLLOUT[0]) + "\n{oops\n")
    with pytest.raises(RescoreError, match=r"bad.jsonl:2: not JSON"):
        rescore(bad, rubric, tmp_path / "o.jsonl")
    _write(bad, [{"episode_id": "a", "step": 0, "action": {}}])
    with pytest.raises(RescoreError, match="missing observation"):
        rescore(bad, rubric, tmp_path / "o.jsonl")
    _write(bad, [ROLLOUT[0], {**ROLLOUT[1], "observation": {}}])
    with pytest.raises(RescoreError, match=r"bad.jsonl:2: rubric 'exact_match': field 'observation.answer'"):
        rescore(bad, rubric, tmp_path / "o.jsonl")
    assert not (tmp_path / "o.jsonl").exists() and not (tmp_path / "o.jsonl.partial").exists()
    with pytest.raises(ValueError, match="whole episodes only"):
        rescore(bad, build_rubric("discounted_return", {}), tmp_path / "o.jsonl")


def test_rescore_with_the_llm_judge(tmp_path: Path) -> None:
    with FakeChatServer(lambda body, n: Reply(json.dumps({"score": 0.5 if n else 0.9, "rationale": f"r{n}"}))) as srv:
        rubric = build_rubric("llm_judge", {"base_url": srv.url, "model": "m", "response": "action.message"})
        summary = rescore(_write(tmp_path / "in.jsonl", ROLLOUT), rubric, tmp_path / "out.jsonl")
    assert summary.written == 3
    out = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert out[0]["reward"] == 0.9 and out[0]["reward_rationales"] == {"": "r0"}
    assert out[0]["reward_components"] == {"raw": 0.9}


def _cli(*args: str) -> Any:
    from openenv.cli.main import build_app

    argv = list(args)
    return CliRunner().invoke(build_app(argv), argv, env={"COLUMNS": "200", "NO_COLOR": "1"})


def test_cli_list_table_and_json() -> None:
    result = _cli("rubrics", "list")
    assert result.exit_code == 0, result.output
    assert "llm_judge" in result.stdout and "math_equivalence" in result.stdout and "19 rubrics" in result.stdout
    doc = json.loads(_cli("rubrics", "list", "--json").stdout)
    assert doc["schema"] == "openenv.rubrics/1"
    assert {r["name"] for r in doc["rubrics"]} == set(RUBRICS)
    assert next(r for r in doc["rubrics"] if r["name"] == "exact_match")["ref"] == "openenv_rubrics.builtin:ExactMatch"


def test_cli_rescore(tmp_path: Path) -> None:
    src = _write(tmp_path / "in.jsonl", ROLLOUT)
    out = tmp_path / "out.jsonl"
    result = _cli("rubrics", "rescore", str(src), "--rubric",
                  "exact_match=response=action.message,target=observation.answer", "-o", str(out), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["written"] == 3 and len(out.read_text().splitlines()) == 3
    unknown = _cli("rubrics", "rescore", str(src), "--rubric", "exact_mach", "-o", str(out))
    assert unknown.exit_code == 2 and "Did you mean 'exact_match'?" in unknown.stderr
    faulty = _cli("rubrics", "rescore", str(src), "--rubric", "exact_match=expected=4", "-o", str(out))
    assert faulty.exit_code == 1 and "in.jsonl:1: rubric 'exact_match'" in faulty.stderr
    same = _cli("rubrics", "rescore", str(src), "--rubric", "exact_match=expected=4", "-o", str(src))
    assert same.exit_code == 2 and "must not overwrite the input" in same.stderr
    episodic = _cli("rubrics", "rescore", str(src), "--rubric", "discounted_return", "-o", str(out))
    assert episodic.exit_code == 2 and "whole episodes only: add --episode" in episodic.stderr
    assert "level=" not in episodic.stderr


def test_listing_imports_no_rubric_module() -> None:
    code = ("import sys\nfrom openenv.plugins import PluginManager\nimport openenv_rubrics.plugin as p\n"
            "pm = PluginManager(strict=True, entry_points=[]); pm.register(p, name='rubrics')\n"
            "assert len(pm.catalog.rubrics) > 10\n"
            "print(','.join(sorted(m for m in sys.modules if m.startswith(('openenv_rubrics.', 'httpx', 'math_verify',"
            " 'sympy')) and m != 'openenv_rubrics.plugin')))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == ""


def test_rubric_error_is_structured() -> None:
    err = RubricError("judge", "down")
    assert (err.rubric, err.reason, err.code, str(err)) == ("judge", "down", "RUBRIC_ERROR", "rubric 'judge': down")
