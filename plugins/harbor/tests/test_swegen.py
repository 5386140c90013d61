"""``openenv tasks generate swe``: the mutation operators, the issue text, bad input as one-line
errors, and a few tasks generated from one real PyPI project (downloaded once into a cache) whose
oracle scores 1 and no-op 0 in the local runtime."""

from __future__ import annotations

import ast
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from openenv_harbor.swegen.cli import app
from openenv_harbor.swegen.mutate import OPERATORS, candidates, shuffled
from openenv_harbor.swegen.select import Layout, baseline, layout_of
from openenv_harbor.swegen.sources import Project, SweGenError, parse_project
from openenv_harbor.swegen.write import Kept, issue_text

SOURCE = b'''\
def clamp(value, low=0, high=10, strict=False):
    if value < low:
        return low
    if value > high and not strict:
        return high - 1 + 1
    while value >= high * 2:
        value = value // 2
    return value if value in (1, 2) else value
'''


def test_every_operator_makes_parsable_single_edits() -> None:
    found = candidates("m.py", SOURCE)
    assert {m.operator for m in found} == set(OPERATORS)
    for m in found:
        mutated = m.apply(SOURCE)
        assert mutated != SOURCE
        ast.parse(mutated)
    swaps = {(m.before, m.after) for m in found if m.operator in {"compare", "binop", "boolop"}}
    assert {("<", "<="), (">", ">="), (">=", ">"), ("-", "+"), ("+", "-"), ("*", "//"), ("//", "*"),
            ("and", "or"), ("in", "not in")} <= swaps
    defaults = {(m.before, m.after) for m in found if m.operator == "wrong_default"}
    assert defaults == {("0", "1"), ("10", "11"), ("False", "True")}
    dropped = next(m for m in found if m.operator == "drop_branch")
    assert b"    if value < low:\n        pass\n" in dropped.apply(SOURCE)


def test_the_order_is_deterministic_by_seed_and_interleaves_operators() -> None:
    found = candidates("m.py", SOURCE)
    assert [m.id for m in shuffled(found, 3)] == [m.id for m in shuffled(list(reversed(found)), 3)]
    assert [m.id for m in shuffled(found, 3)] != [m.id for m in shuffled(found, 4)]
    first = shuffled(found, 3)[:len(OPERATORS)]
    assert {m.operator for m in first} == set(OPERATORS)


def test_the_issue_names_the_failing_tests_not_the_diff(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_bytes(SOURCE)
    m = next(m for m in candidates("pkg/m.py", SOURCE) if m.operator == "compare" and m.before == "<")
    mutated_line = m.apply(SOURCE).decode().splitlines()[m.line - 1].strip()
    kept = Kept(Project("clampy", "1.0"), Layout(tmp_path, ".", ("tests",)), m,
                ("tests/test_m.py::test_low", "tests/test_m.py::test_echo"), ("tests/test_m.py::test_high",),
                {"tests/test_m.py::test_low": "AssertionError: assert 0 == -5",
                 "tests/test_m.py::test_echo": f"SyntaxError near {mutated_line}"})
    text = issue_text(kept)
    assert "tests/test_m.py::test_low" in text and "assert 0 == -5" in text
    assert mutated_line not in text and "if value < low" not in text  # neither the bugged nor the fixed line
    assert "test_echo" in text  # listed, its message that quoted the line dropped
    assert "clampy 1.0" in text


def _one_line(message: str) -> None:
    assert "\n" not in message and message


def test_a_single_module_project_is_mutated_in_its_module_not_its_build_scripts(tmp_path: Path) -> None:
    for name in ("my_parse.py", "setup.py", "versioneer.py"):
        (tmp_path / name).write_text("def f():\n    return 1\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_it.py").write_text("def test_f():\n    pass\n")
    assert layout_of(Project("my-parse", "1.0"), tmp_path).modules() == ["my_parse.py"]
    assert layout_of(Project("other", "1.0"), tmp_path).modules() == []


def test_bad_input_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(SweGenError, match="NAME==VERSION") as bad_spec:
        parse_project("inflection>=0.5")
    _one_line(str(bad_spec.value))
    with pytest.raises(SweGenError, match="no tests") as no_tests:
        layout_of(Project("empty", "1.0"), tmp_path)
    _one_line(str(no_tests.value))
    tree = tmp_path / "broken"
    (tree / "tests").mkdir(parents=True)
    (tree / "broken.py").write_text("def two():\n    return 3\n")
    (tree / "tests" / "test_two.py").write_text("import broken\n\ndef test_two():\n    assert broken.two() == 2\n")
    project = Project("broken", "1.0")
    with pytest.raises(SweGenError, match="its own tests fail before any mutation") as failing:
        baseline(project, layout_of(project, tree))
    _one_line(str(failing.value))


def test_an_unknown_project_is_a_one_line_cli_error_that_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "suite"
    result = CliRunner().invoke(app, ["generate", "swe", "openenv-no-such-project-swegen==1.0", "--out", str(out),
                                      "--cache-dir", str(tmp_path / "cache")])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "not on the package index" in lines[0]
    assert not out.exists()


@pytest.mark.slow
@pytest.mark.slow_ok("downloads one sdist (once), runs its suite under coverage and the mutations' tests, then "
                     "grades 2 oracles and 2 no-ops in boxes: about 30 s on 2 shared cores")
@pytest.mark.bwrap
@pytest.mark.usefixtures("usable_bwrap")
def test_generated_tasks_validate_oracle_one_noop_zero(tmp_path: Path) -> None:
    pytest.importorskip("coverage")
    from openenv_harbor.task import load_suite
    from openenv_harbor.validate import validate_suite

    cache = Path(os.environ.get("OPENENV_SWEGEN_CACHE") or Path.home() / ".cache" / "openenv" / "swegen")
    out = tmp_path / "suite"
    result = CliRunner().invoke(app, ["generate", "swe", "inflection==0.5.1", "--out", str(out), "--max-per-project",
                                      "2", "--cache-dir", str(cache), "--test-projects", "inflection", "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.output[result.output.index("{"):])
    assert summary["kept"] == 2 and summary["tried"] >= 2
    suite = load_suite(out)
    assert not suite.errors and len(suite.tasks) == 2
    assert {t.split for t in suite.tasks} == {"test"}
    for task in suite.tasks:
        expected = json.loads((task.path / "tests" / "expected.json").read_text())
        assert expected["fail_to_pass"] and expected["pass_to_pass"]
        assert task.metadata["project"] == "inflection==0.5.1"
    checks = validate_suite(out, jobs=2)  # the system temporary folder: the grader (uid 65534) enters it
    assert [(c.oracle, c.noop, c.errors) for c in checks] == [(1.0, 0.0, [])] * 2
