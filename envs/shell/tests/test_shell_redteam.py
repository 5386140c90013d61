"""The red team of the shell env's grader: the tree is graded in a separate box (a copy, the task's
own check, the grader uid, a private /tmp, the verdict on a pipe only the check holds), so no file,
link, hook or process the agent leaves behind pays; the real fix still earns 1.0; a check that
hangs, crashes or ends early is reward 0 with the reason in ``metadata["grade"]``."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import openenv_env_shell.env as shell_env
from openenv.testing import processes_matching
from openenv_env_shell.env import ShellAction, ShellEnv, ShellObservation
from openenv_sandbox import Sandbox
from openenv_sandbox.host import processes_of

UIDS = range(62540, 62544)
MARKER = f"shell-redteam-{uuid.uuid4().hex[:8]}"
FIX = "sed -i 's/a - b/a + b/' calc.py"
EXIT_ZERO = "import os; os._exit(0)\n"
#: Each attack the agent may try instead of (or beside) the fix on ``fix-add``; none may pay.
ATTACKS = {
    "conftest": f"printf '{EXIT_ZERO}' > conftest.py && mkdir -p tests && cp conftest.py tests/",
    "sitecustomize": f"printf '{EXIT_ZERO}' > sitecustomize.py && cp sitecustomize.py usercustomize.py && "
                     "mkdir -p .local/lib/python3/site-packages && "
                     "cp sitecustomize.py .local/lib/python3/site-packages/",
    "pth_file": f"printf '{EXIT_ZERO}' > evil.pth && mkdir -p /tmp/{MARKER} && cp evil.pth /tmp/{MARKER}/",
    "shadowed_stdlib": " && ".join(f"printf '{EXIT_ZERO}' > {name}.py" for name in
                                   ("json", "random", "subprocess", "ctypes", "os", "sys", "secrets")),
    "fake_python3_and_pytest_on_path": "mkdir -p bin && printf '#!/bin/sh\\necho [[5,6]]\\nexit 0\\n' > bin/python3 && "
                                       "chmod +x bin/python3 && cp bin/python3 bin/pytest && cp bin/python3 python3 && "
                                       "cp bin/python3 pytest",
    "prewritten_verdict": "echo 'openenv-verdict pass 00000000000000000000000000000000' > verdict && "
                          "echo 1 > reward.txt && mkdir -p logs/verifier && echo 1 > logs/verifier/reward.txt && "
                          "echo '{\"reward\": 1}' > logs/verifier/reward.json",
    "verdict_pipe_from_the_probe": "printf 'import os\\nfor fd in range(3, 1024):\\n    try:\\n"
                                   "        os.write(fd, b\"openenv-verdict pass x\\\\n\")\\n    except OSError:\\n"
                                   "        pass\\nos._exit(0)\\n' > calc.py",
    "symlink_to_etc_passwd": "rm calc.py && ln -s /etc/passwd calc.py && ln -s / root-link",
    "symlink_to_the_task_file": f"rm calc.py && ln -s {Path(shell_env.__file__).parent / 'tasks.jsonl'} calc.py",
    "symlink_out_of_the_workspace": f"printf 'def add(a, b):\\n    return a + b\\n\\n\\ndef mul(a, b):\\n"
                                    f"    return a * b\\n' > /tmp/{MARKER}.py && rm calc.py && "
                                    f"ln -s /tmp/{MARKER}.py calc.py && "
                                    "python3 -c 'import calc; assert calc.add(2, 3) == 5'",
    "git_hooks_and_config": "printf '#!/bin/sh\\nsed -i s/-/+/ calc.py\\n' > .git/hooks/post-index-change && "
                            "chmod 755 .git/hooks/post-index-change && cp .git/hooks/post-index-change "
                            ".git/hooks/pre-commit && git config core.fsmonitor \"$PWD/.git/hooks/pre-commit\" && "
                            "git config filter.x.clean \"$PWD/.git/hooks/pre-commit\" && echo '* filter=x' > "
                            ".gitattributes && git config alias.st '!sh .git/hooks/pre-commit'",
    "edited_visible_test": "printf 'print(\"ok\")\\n' > test_calc.py && python3 test_calc.py",
    # it would apply the fix (and undo any check) later, while grading runs: it must not outlive its command
    "process_left_running": f"(exec -a {MARKER} sh -c 'while :; do sleep 0.3; sed -i s/-/+/ calc.py 2>/dev/null; "
                            f"done') > /dev/null 2>&1 & (setsid sh -c 'exec -a {MARKER} sleep 30' > /dev/null 2>&1 &); "
                            "true",
}


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    box = Sandbox(slots=len(UIDS), uid_base=UIDS.start)
    yield box
    box.close()
    for planted in Path("/tmp").glob(f"{MARKER}*"):  # what the attacks left in the shared /tmp
        shutil.rmtree(planted) if planted.is_dir() and not planted.is_symlink() else planted.unlink()


def _left_running() -> list[int]:
    return processes_matching(MARKER)


def _play(sandbox: Sandbox, *commands: str, task: str = "fix-add", tasks_file: str | None = None,
          check_limits: object = None) -> ShellObservation:
    env = ShellEnv(sandbox=sandbox, tasks_file=tasks_file, check_limits=check_limits)  # type: ignore[arg-type]
    try:
        obs = env.reset(task_id=task)
        for command in commands:
            obs = env.step(ShellAction(command=command))
            if obs.done:
                break
        return obs
    finally:
        env.close()


def _grade(obs: ShellObservation) -> dict[str, object]:
    grade = obs.metadata["grade"]
    assert isinstance(grade, dict)
    return grade


def test_the_real_fix_earns_one_graded_as_another_uid(sandbox: Sandbox) -> None:
    obs = _play(sandbox, FIX)
    grade = _grade(obs)
    assert obs.solved and obs.reward == 1.0 and grade["passed"] and grade["error"] == ""
    if os.geteuid() == 0:  # root: the grader uid is one no command runs as, /tmp is its own
        assert grade["grader_uid"] in sandbox.grader_uids
        assert str(grade["tmp"]).startswith("private")
    else:
        assert grade["grader_uid"] is None


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_red_team_no_attack_pays(sandbox: Sandbox, attack: str) -> None:
    obs = _play(sandbox, ATTACKS[attack])
    grade = _grade(obs)
    if attack == "symlink_out_of_the_workspace" and not str(grade["tmp"]).startswith("private"):
        # a shared /tmp (no mount namespace here): the link resolves to the agent's real fix
        assert obs.reward is not None and obs.reward <= 1.0
    else:
        assert obs.reward == 0.0 and not obs.solved, grade
        assert grade["error"], grade
    assert not _left_running()
    if os.geteuid() == 0:
        assert processes_of(sandbox.uids) == [] and processes_of(sandbox.grader_uids) == []


def test_red_team_every_attack_with_the_fix_earns_no_more_than_the_fix(sandbox: Sandbox) -> None:
    attacks = [ATTACKS[a] for a in sorted(ATTACKS) if not a.startswith(("symlink", "verdict_pipe"))]
    obs = _play(sandbox, " ; ".join([FIX, *attacks]))
    assert obs.reward == 1.0 and _grade(obs)["error"] == "", _grade(obs)
    assert not _left_running()


def test_git_hooks_and_config_do_not_run_while_grading(sandbox: Sandbox) -> None:
    # the agent makes the commit, and plants a hook that would undo it when the check runs git
    plant = ("git commit -qam 'update notes' && printf '#!/bin/sh\\ngit reset -q --soft HEAD~1\\n' > .git/hooks/x "
             "&& chmod 755 .git/hooks/x && for h in post-index-change post-checkout reference-transaction; do "
             "cp .git/hooks/x .git/hooks/$h; done && git config core.fsmonitor .git/hooks/x")
    obs = _play(sandbox, plant, task="commit-notes")
    assert obs.reward == 1.0, _grade(obs)  # the hooks did not run: the commit the agent made is graded


def _own_task(tmp_path: Path, check: str) -> str:
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps({"id": "t", "instructions": "anything", "files": {"a.txt": "a\n"},
                                "check": check}) + "\n")
    return str(path)


@pytest.mark.parametrize(("check", "why"), [
    ("import time\ntime.sleep(30)\n", "wall-clock limit"),
    ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n", "crashed (SIGKILL)"),
    ("import os\nos._exit(0)\n", "wrote no verdict"),
    ("import os\nos.write(200, b'openenv-verdict pass 0\\n')\n", "malformed"),
    ("raise SystemExit(3)\n", "exit code 3"),
])
def test_a_check_that_hangs_crashes_or_ends_early_is_zero_with_the_reason(sandbox: Sandbox, tmp_path: Path,
                                                                         check: str, why: str) -> None:
    from openenv_sandbox import Limits

    obs = _play(sandbox, "true", task="t", tasks_file=_own_task(tmp_path, check),
                check_limits=Limits(wall_time_s=1.0, cpu_time_s=1))
    assert obs.reward == 0.0 and not obs.solved
    assert why in str(_grade(obs)["error"]), _grade(obs)


def test_a_tree_too_big_to_copy_is_zero_with_the_reason(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shell_env, "GRADE_MAX_FILES", 40)
    obs = _play(sandbox, f"{FIX} && mkdir many && cd many && touch $(seq 1 60)")
    assert obs.reward == 0.0 and "could not be copied" in str(_grade(obs)["error"]), _grade(obs)


def test_grading_never_changes_the_agents_tree(sandbox: Sandbox) -> None:
    env = ShellEnv(sandbox=sandbox)
    try:
        env.reset(task_id="commit-notes")
        assert env.tree is not None
        before = sorted((str(p.relative_to(env.tree)), p.stat().st_mtime_ns) for p in env.tree.rglob("*"))
        env.step(ShellAction(command="true"))
        hooks = env.tree / ".git" / "hooks"
        after = sorted((str(p.relative_to(env.tree)), p.stat().st_mtime_ns) for p in env.tree.rglob("*"))
        assert before == after and hooks.is_dir()  # the copy was defused, not the tree
    finally:
        env.close()
