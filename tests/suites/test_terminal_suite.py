"""The terminal suite (``suites/terminal``): its shape, its generated files, its README table, and
every task's oracle (reward 1), no-op agent and hollow agent (empty outputs; reward 0) in bubblewrap
boxes through the suite's own checker, ``suites/terminal/check.py`` — plus the checker's refusals,
so that it can fail."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tomllib
import uuid
from collections import Counter
from pathlib import Path
from types import ModuleType

import pytest

from openenv.testing import processes_matching

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "suites" / "terminal"
CATEGORIES = {"files and text processing", "git history surgery", "building and fixing a C or Python program",
              "service configuration", "data wrangling", "log forensics"}
MAX_FILE_BYTES = 50 * 1024


def _load_checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("terminal_suite_check", SUITE / "check.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


check = _load_checker()
TASKS = check.find_tasks(SUITE)


@pytest.fixture(scope="module")
def usable_bwrap() -> None:
    """Skip without a bubblewrap that can start a box here (fail instead with OPENENV_REQUIRE_BWRAP=1)."""
    from openenv_harbor.box import bwrap_problem

    reason = bwrap_problem()
    if reason:
        if os.environ.get("OPENENV_REQUIRE_BWRAP", "").lower() in {"1", "true", "yes"}:
            pytest.fail(f"OPENENV_REQUIRE_BWRAP is set but {reason}", pytrace=False)
        pytest.skip(reason)


def test_suite_has_forty_tasks_spread_over_the_six_categories() -> None:
    assert len(TASKS) >= 40
    categories: Counter[str] = Counter()
    difficulties: Counter[str] = Counter()
    for path in TASKS:
        task = check.load_task(path)
        meta = task.config["metadata"]
        assert task.config["version"] == "1.0", path.name
        assert meta["category"] in CATEGORIES, path.name
        assert meta["difficulty"] in {"easy", "medium", "hard"}, path.name
        assert meta["tags"], path.name
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", path.name), f"{path.name}: task ids are kebab-case"
        assert task.config["environment"]["allow_internet"] is False, path.name
        assert (path / "environment" / "Dockerfile").read_text().splitlines()[0] == "FROM openenv-harbor-base"
        assert len((path / "instruction.md").read_text()) > 200, f"{path.name}: the instruction is too thin"
        categories[meta["category"]] += 1
        difficulties[meta["difficulty"]] += 1
    assert set(categories) == CATEGORIES
    assert min(categories.values()) >= 6, categories
    assert min(difficulties.values()) >= 5, difficulties


def test_readme_table_lists_every_task() -> None:
    rows = re.findall(r"^\| `([a-z0-9-]+)` \| ([^|]+) \| (easy|medium|hard) \| [^|]+ \|([^|]*)\|$",
                      (SUITE / "README.md").read_text(), re.MULTILINE)
    documented = {task: (category.strip(), difficulty, tools.strip()) for task, category, difficulty, tools in rows}
    actual = {}
    for path in TASKS:
        meta = tomllib.loads((path / "task.toml").read_text())["metadata"]
        label = re.search(r'^LABEL org.openenv.tools="([^"]*)"$', (path / "environment" / "Dockerfile").read_text(),
                          re.MULTILINE)
        actual[path.name] = (meta["category"], meta["difficulty"], ", ".join(label[1].split()) if label else "")
    assert documented == actual


def test_generated_files_match_the_generator() -> None:
    run = subprocess.run([sys.executable, str(SUITE / "_make.py"), "--check"], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stderr


def test_no_file_of_the_suite_is_git_ignored() -> None:
    # A task file matching .gitignore (build/, dist/, ...) would be missing from a clean clone.
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and a checkout")
    run = subprocess.run(["git", "-C", str(ROOT), "ls-files", "--others", "--ignored", "--exclude-standard",
                          "--directory", "suites"], capture_output=True, text=True, timeout=60)
    ignored = [p for p in run.stdout.splitlines() if not re.search(r"(__pycache__|\.mypy_cache|\.ruff_cache)/$", p)]
    assert run.returncode == 0 and not ignored, ignored


def test_suite_holds_small_text_files_only() -> None:
    for path in SUITE.rglob("*"):
        if {"__pycache__", ".mypy_cache", ".ruff_cache"} & set(path.parts):
            continue  # caches of a developer's tools (git-ignored)
        assert path.name != ".git", f"{path}: a git repository is built at set-up, never committed"
        if path.is_file():
            data = path.read_bytes()
            assert len(data) <= MAX_FILE_BYTES, f"{path}: {len(data)} bytes"
            assert b"\0" not in data, f"{path}: binary content"
            data.decode("utf-8")


@pytest.mark.bwrap
@pytest.mark.usefixtures("usable_bwrap")
def test_every_task_oracle_scores_1_and_noop_and_hollow_score_0(tmp_path: Path) -> None:
    outcomes = check.check_suite(TASKS, jobs=2, scratch=tmp_path)
    failures = {o.task: o.errors for o in outcomes if not o.ok}
    assert not failures, "\n".join(f"{task}: {errors}" for task, errors in failures.items())
    assert len(outcomes) == len(TASKS)


@pytest.mark.bwrap
@pytest.mark.usefixtures("usable_bwrap")
def test_every_task_grades_the_same_as_another_user() -> None:
    # The runtime grades as a different user than the agent's; no verifier may need to write the
    # workspace or own it (git's safe.directory, bytecode, scratch builds in /tmp).
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("grading as another user needs root and setpriv")
    # scratch in the system's /tmp: pytest's own temporary folders are closed to other users
    outcomes = check.check_suite(TASKS, jobs=2, grader_uid=65534)
    failures = {o.task: o.errors for o in outcomes if not o.ok}
    assert not failures, "\n".join(f"{task}: {errors}" for task, errors in failures.items())


def _copy_task(tmp_path: Path, name: str = "csv-sales-summary") -> Path:
    target = tmp_path / "suite" / name
    shutil.copytree(SUITE / name, target)
    return target


@pytest.mark.bwrap
@pytest.mark.usefixtures("usable_bwrap")
def test_checker_fails_a_verifier_that_always_pays(tmp_path: Path) -> None:
    task = _copy_task(tmp_path)
    (task / "tests" / "test.sh").write_text("mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt\n")
    outcome = check.check_task(task, scratch=tmp_path)
    assert not outcome.ok
    assert outcome.oracle_reward == 1.0
    assert "no-op: reward 1, expected 0" in outcome.errors


@pytest.mark.bwrap
@pytest.mark.usefixtures("usable_bwrap")
def test_checker_fails_a_verifier_that_only_checks_the_output_exists(tmp_path: Path) -> None:
    task = _copy_task(tmp_path)
    (task / "tests" / "test_task.py").write_text(
        "import sys\nfrom pathlib import Path\nsys.exit(0 if Path('/app/out/region_totals.csv').exists() else 1)\n")
    outcome = check.check_task(task, scratch=tmp_path)
    assert (outcome.oracle_reward, outcome.noop_reward, outcome.hollow_reward) == (1.0, 0.0, 1.0)
    assert not outcome.ok
    assert any(e.startswith("hollow: reward 1 with the oracle's outputs emptied") for e in outcome.errors)


@pytest.mark.bwrap
@pytest.mark.usefixtures("usable_bwrap")
@pytest.mark.parametrize(("script", "why"), [
    ("echo 1.5 > /logs/verifier/reward.txt", "reward 1.5 is not a number in [0, 1]"),
    ("echo yes > /logs/verifier/reward.txt", "unreadable reward"),
    ("echo 1 > /logs/verifier/reward.txt; echo '{\"reward\": 1}' > /logs/verifier/reward.json",
     "both reward.txt and reward.json were written"),
    ("echo '{\"score\": 1}' > /logs/verifier/reward.json", "reward.json must be a JSON object with a 'reward' key"),
    ("true", "the verifier wrote no /logs/verifier/reward.txt or reward.json"),
])
def test_checker_fails_closed_on_a_bad_reward(tmp_path: Path, script: str, why: str) -> None:
    task = _copy_task(tmp_path)
    (task / "tests" / "test.sh").write_text(f"mkdir -p /logs/verifier\n{script}\n")
    outcome = check.check_task(task, scratch=tmp_path)
    assert (outcome.oracle_reward, outcome.noop_reward) == (None, None)
    assert any(e.startswith("oracle: ") and why in e for e in outcome.errors), outcome.errors


@pytest.mark.bwrap
@pytest.mark.usefixtures("usable_bwrap")
def test_checker_fails_an_oracle_that_does_nothing(tmp_path: Path) -> None:
    task = _copy_task(tmp_path)
    (task / "solution" / "solve.sh").write_text("true\n")
    outcome = check.check_task(task, scratch=tmp_path)
    assert not outcome.ok
    assert "oracle: reward 0, expected 1" in outcome.errors


@pytest.mark.bwrap
@pytest.mark.usefixtures("usable_bwrap")
def test_checker_cuts_a_hanging_oracle_at_the_agent_timeout(tmp_path: Path) -> None:
    task = _copy_task(tmp_path)
    marker = f"tsuite-hang-{uuid.uuid4().hex}"
    (task / "solution" / "solve.sh").write_text(f"(exec -a {marker} sleep 300) &\nexec -a {marker} sleep 300\n")
    toml = (task / "task.toml").read_text()
    (task / "task.toml").write_text(re.sub(r"\[agent\]\ntimeout_sec = \d+", "[agent]\ntimeout_sec = 1", toml))
    outcome = check.check_task(task, scratch=tmp_path)
    assert "oracle: solution/solve.sh exited 124 ([agent] timeout_sec hit)" in outcome.errors
    left = processes_matching(marker)
    assert not left, f"the box left processes running: {left}"


def test_checker_names_the_file_of_a_malformed_task(tmp_path: Path) -> None:
    task = _copy_task(tmp_path)
    (task / "environment" / "Dockerfile").write_text("FROM openenv-harbor-base\nWORKDIR /app\nEXPOSE 80\n")
    errors = check.check_task(task, scratch=tmp_path).errors
    assert len(errors) == 1
    assert "environment/Dockerfile:3: EXPOSE is not allowed" in errors[0]
    assert "FROM, WORKDIR, COPY, ENV, LABEL, RUN" in errors[0]
    (task / "tests" / "test.sh").unlink()
    errors = check.check_task(task, scratch=tmp_path).errors
    assert errors and "tests/test.sh: missing" in errors[0]


def test_checker_suggests_a_task_id() -> None:
    with pytest.raises(check.TaskError, match="did you mean 'git-split-commit'"):
        check.find_tasks(SUITE, ["git-split-commits"])
