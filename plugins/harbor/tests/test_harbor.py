"""openenv_harbor: loading (broken tasks named, the rest loads), the fail-closed reward, episodes in
bubblewrap boxes graded in a fresh box, the red team of the grader, bad input, ``openenv validate
harbor:PATH``, and docs/harbor.md's commands (``openenv eval`` with the oracle policy scoring 1.0
and the no-op 0.0 on terminal tasks)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from openenv.errors import ValidationError
from openenv.testing import processes_matching
from openenv_harbor import load_suite, read_reward, run_oracle
from openenv_harbor.box import prepare
from openenv_harbor.env import DEMO_SUITE, HarborAction, HarborEnv
from openenv_harbor.task import HarborTaskError, load_task

FIXTURES = Path(DEMO_SUITE)
ROOT = Path(__file__).resolve().parents[3]
FIX = "sed -i 's/return a - b/return a + b/' calc.py"


def _suite(tmp_path: Path, *names: str) -> Path:
    root = tmp_path / "suite"
    for name in names:
        shutil.copytree(FIXTURES / "fix-add", root / name)
    return root


def test_a_broken_task_is_named_and_the_rest_of_the_suite_loads(tmp_path: Path) -> None:
    root = _suite(tmp_path, "good", "bad-toml", "no-test", "no-instruction", "bad-timeout")
    (root / "bad-toml" / "task.toml").write_text("version = \n")
    (root / "no-test" / "tests" / "test.sh").unlink()
    (root / "no-instruction" / "instruction.md").unlink()
    (root / "bad-timeout" / "task.toml").write_text("[agent]\ntimeout_sec = -1\n")
    suite = load_suite(root)
    assert [t.id for t in suite.tasks] == ["good"]
    assert suite.tasks[0].split == "train"
    assert "task 'bad-toml'" in str(suite.errors["bad-toml"]) and "task.toml: not valid TOML" in str(
        suite.errors["bad-toml"])
    assert "tests/test.sh: missing" in str(suite.errors["no-test"])
    assert "instruction.md: missing" in str(suite.errors["no-instruction"])
    assert "[agent] timeout_sec must be a positive number" in str(suite.errors["bad-timeout"])
    with pytest.raises(HarborTaskError, match="did you mean 'good'"):
        suite.get("goods")


def test_a_dockerfile_the_local_runtime_cannot_run_names_its_line(tmp_path: Path) -> None:
    root = _suite(tmp_path, "t")
    (root / "t" / "environment" / "Dockerfile").write_text("FROM x\nEXPOSE 80\n")
    task = load_task(root / "t")  # still a valid task (the Docker runtime would build it)
    with pytest.raises(HarborTaskError, match=r"environment/Dockerfile:2: EXPOSE is not allowed"):
        prepare(task, tmp_path / "box")


@pytest.mark.parametrize(("files", "why"), [
    ({}, "wrote no /logs/verifier/reward.txt"),
    ({"reward.txt": "1", "reward.json": '{"reward": 1}'}, "both reward.txt and reward.json"),
    ({"reward.txt": "yes"}, "unreadable reward"),
    ({"reward.txt": "1 1"}, "must hold one number"),
    ({"reward.txt": "1.5"}, "not a number in [0, 1]"),
    ({"reward.txt": "-0.1"}, "not a number in [0, 1]"),
    ({"reward.txt": "nan"}, "not finite"),
    ({"reward.txt": "inf"}, "not finite"),
    ({"reward.json": '{"score": 1}'}, "with a 'reward' key"),
    ({"reward.json": '{"reward": true}'}, "is not a number"),
    ({"reward.json": "[1]"}, "with a 'reward' key"),
    ({"reward.json": "{"}, "unreadable reward"),
])
def test_the_reward_is_read_fail_closed(tmp_path: Path, files: dict[str, str], why: str) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    reward, _, error = read_reward(tmp_path)
    assert reward is None and why in error


def test_a_symlinked_reward_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").write_text("1")
    (tmp_path / "reward.txt").symlink_to(tmp_path / "elsewhere")
    assert read_reward(tmp_path)[0] is None


def test_a_good_reward_and_its_components_are_read(tmp_path: Path) -> None:
    (tmp_path / "reward.json").write_text(json.dumps({"reward": 0.5, "style": 1, "note": "x"}))
    assert read_reward(tmp_path) == (0.5, {"style": 1.0}, "")


def _play(tmp_path: Path, *commands: str) -> tuple[float, dict[str, object]]:
    env = HarborEnv.from_spec(str(FIXTURES))(scratch=None)
    try:
        env.reset(task_id="fix-add")
        for command in commands:
            obs = env.step(HarborAction(command=command))
            assert not obs.done
        obs = env.step(HarborAction(submit=True))
        assert obs.done and obs.grade is not None
        return float(obs.reward or 0.0), obs.grade
    finally:
        env.close()


@pytest.mark.bwrap
@pytest.mark.usefixtures("usable_bwrap")
def test_an_episode_is_graded_in_a_fresh_box(tmp_path: Path) -> None:
    assert _play(tmp_path)[0] == 0.0  # the no-op
    reward, graded = _play(tmp_path, FIX)
    assert reward == 1.0 and graded["error"] == ""
    if os.geteuid() == 0 and shutil.which("setpriv"):
        assert graded["grader_uid"] == 65534


@pytest.mark.bwrap
@pytest.mark.usefixtures("usable_bwrap")
def test_an_unknown_task_id_is_a_validation_error_with_a_hint() -> None:
    env = HarborEnv.from_spec(str(FIXTURES))()
    with pytest.raises(ValidationError, match="did you mean 'fix-add'"):
        env.reset(task_id="fix-ad")


MARKER = f"harbor-redteam-{uuid.uuid4().hex[:8]}"
#: Each attack the graded agent may try instead of (or beside) the fix; none may pay.
ATTACKS = {
    "conftest": "printf 'import pytest\\n@pytest.hookimpl(tryfirst=True)\\n"
                "def pytest_runtest_makereport(item, call):\\n    pass\\n' > conftest.py",
    "sitecustomize": "printf 'import pathlib\\npathlib.Path(\"/logs/verifier/reward.txt\").write_text(\"1\")\\n'"
                     " > sitecustomize.py; cp sitecustomize.py usercustomize.py",
    "pth_file": "printf 'import os; open(\"/logs/verifier/reward.txt\", \"w\").write(\"1\")\\n' > evil.pth; "
                "mkdir -p /tmp/.local/lib && cp evil.pth /tmp/.local/lib/",
    "fake_unittest_module": "mkdir -p unittest && printf 'import sys\\nopen(\"/logs/verifier/reward.txt\",\"w\")"
                            ".write(\"1\")\\nsys.exit(0)\\n' > unittest/__main__.py && touch unittest/__init__.py",
    "fake_python3_on_path": "mkdir -p bin && printf '#!/bin/sh\\nexit 0\\n' > bin/python3 && chmod +x bin/python3 "
                            "&& cp bin/python3 bin/pytest && export PATH=/app/bin:$PATH",
    # git runs these as the grader, before the tests: each would apply the fix in a world-writable tree
    "git_hooks_and_fsmonitor": "printf '#!/bin/sh\\nsed -i s/-/+/ /app/calc.py\\n' > /app/.fix && chmod 755 /app/.fix"
                               " && for h in post-checkout pre-commit post-index-change; do cp /app/.fix .git/hooks/$h;"
                               " done && git config core.fsmonitor /app/.fix && git config filter.x.clean /app/.fix"
                               " && git config alias.status '!/app/.fix' && echo '* filter=x' > .gitattributes"
                               " && chmod -R a+rwX /app",
    "edit_test_file": "mkdir -p /tests && printf 'import unittest\\n' > /tests/check_calc.py; "
                      "echo 'echo 1 > /logs/verifier/reward.txt' > /tests/test.sh; true",
    "prewritten_reward": "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt && "
                         "echo '{\"reward\": 1}' > /logs/verifier/reward.json",
    "symlink_out_of_workspace": "printf 'def add(a, b):\\n    return a + b\\n' > /tmp/real.py && rm calc.py && "
                                "ln -s /tmp/real.py calc.py && python3 -c 'import calc; assert calc.add(2, 3) == 5'",
    "read_the_solution": f"bash {FIXTURES}/fix-add/solution/solve.sh; cd {ROOT} && "
                         "git show HEAD:plugins/harbor/src/openenv_harbor/demo/fix-add/solution/solve.sh | bash",
    "process_left_running": f"(exec -a {MARKER} sh -c 'while :; do echo 1 > /logs/verifier/reward.txt 2>/dev/null;"
                            f" sleep 0.05; done') > /dev/null 2>&1 & nohup sh -c 'exec -a {MARKER} sleep 30' "
                            "> /dev/null 2>&1 & true",
}


def _left_running() -> list[int]:
    return processes_matching(MARKER)


@pytest.mark.bwrap
@pytest.mark.usefixtures("usable_bwrap")
@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_red_team_no_attack_pays(tmp_path: Path, attack: str) -> None:
    reward, graded = _play(tmp_path, ATTACKS[attack])
    assert reward == 0.0, graded
    assert not _left_running()


@pytest.mark.bwrap
@pytest.mark.usefixtures("usable_bwrap")
def test_red_team_every_attack_with_the_fix_earns_no_more_than_the_fix(tmp_path: Path) -> None:
    reward, graded = _play(tmp_path, FIX, *(ATTACKS[a] for a in sorted(ATTACKS) if a != "symlink_out_of_workspace"))
    assert reward <= 1.0 and graded["error"] == ""
    assert not _left_running()


@pytest.mark.bwrap
@pytest.mark.usefixtures("usable_bwrap")
def test_bad_input_a_failing_set_up_and_a_hanging_solution(tmp_path: Path) -> None:
    root = _suite(tmp_path, "fails-to-build", "hangs")
    (root / "fails-to-build" / "environment" / "Dockerfile").write_text("FROM x\nWORKDIR /app\nRUN exit 3\n")
    env = HarborEnv.from_spec(str(root))()
    with pytest.raises(ValidationError, match=r"task 'fails-to-build': .*environment/Dockerfile:3: RUN exited 3"):
        env.reset(task_id="fails-to-build")
    hang = root / "hangs"
    (hang / "solution" / "solve.sh").write_text(f"(exec -a {MARKER} sleep 300) &\nexec -a {MARKER} sleep 300\n")
    (hang / "task.toml").write_text((hang / "task.toml").read_text().replace("timeout_sec = 60", "timeout_sec = 1"))
    graded, solved = run_oracle(load_task(hang))
    assert solved.timed_out and graded.reward == 0.0
    assert not _left_running()
    assert not list(Path(os.environ.get("TMPDIR", "/tmp")).glob("harbor-*-hangs-*")), "box folders left behind"


@pytest.mark.bwrap
@pytest.mark.usefixtures("usable_bwrap")
def test_openenv_validate_reports_the_failing_tasks_of_a_suite(tmp_path: Path) -> None:
    root = _suite(tmp_path, "good", "pays-anyone", "broken")
    (root / "pays-anyone" / "tests" / "test.sh").write_text("mkdir -p /logs/verifier; echo 1 > "
                                                            "/logs/verifier/reward.txt\n")
    (root / "broken" / "task.toml").write_text("[agent\n")
    run = subprocess.run([sys.executable, "-m", "openenv", "validate", f"harbor:{root}", "--json"],
                         capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert run.returncode == 1, run.stderr[-2000:]
    checks = {c["name"]: c for c in json.loads(run.stdout)["checks"]}
    assert checks["good"]["status"] == "pass" and "oracle=1.0 noop=0.0" in checks["good"]["detail"]
    assert checks["pays-anyone"]["status"] == "fail" and "no-op: reward 1, expected 0" in checks["pays-anyone"][
        "detail"]
    assert checks["broken"]["status"] == "fail" and "task.toml: not valid TOML" in checks["broken"]["detail"]
    missing = subprocess.run([sys.executable, "-m", "openenv", "validate", f"harbor:{tmp_path / 'nope'}"],
                             capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert missing.returncode == 2 and "not a folder" in missing.stderr


@pytest.mark.bwrap
@pytest.mark.usefixtures("usable_bwrap")
@pytest.mark.requires_plugins("rollouts", "provider-local", "transport-ws")  # `openenv eval` serves and plays
def test_the_docs_commands_run(tmp_path: Path) -> None:
    # docs/harbor.md's commands, on three tasks of the terminal suite instead of all 45 (time).
    page = (ROOT / "docs" / "harbor.md").read_text()
    block = page.split('test_the_docs_commands_run" -->\n```bash\n', 1)[1].split("```", 1)[0]
    suite = tmp_path / "suites" / "terminal"
    for name in ("csv-sales-summary", "git-tag-releases", "unique-words"):
        shutil.copytree(ROOT / "suites" / "terminal" / name, suite / name)
    script = block.replace("uv run --no-dev --all-packages ", "").replace("\\\n", "")
    for line in filter(None, script.splitlines()):
        argv = [sys.executable, "-m", *line.split()]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=tmp_path)
        assert done.returncode == 0, f"{line}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    oracle = json.loads((tmp_path / "runs" / "harbor-oracle" / "eval.json").read_text())
    noop = json.loads((tmp_path / "runs" / "harbor-noop" / "eval.json").read_text())
    assert (oracle["mean_reward"], noop["mean_reward"], len(oracle["tasks"])) == (1.0, 0.0, 3)
