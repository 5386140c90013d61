"""``grade_copy``: a check on a copy of a tree, in a fresh execution as the grader uid, a private
/tmp, the verdict read fail-closed from a pipe only the check's own process holds."""

from __future__ import annotations

import os
import re
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from openenv_sandbox import Limits, Sandbox, grade_copy, trees
from openenv_sandbox.host import processes_of

UIDS = range(62650, 62654)
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="switching users and mounting need root")


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    box = Sandbox(Limits(cpu_time_s=2, wall_time_s=5.0), slots=len(UIDS), uid_base=UIDS.start)
    yield box
    box.close()


@pytest.fixture
def tree(sandbox: Sandbox) -> Iterator[Path]:
    path = sandbox.make_tree()
    (path / "a.txt").write_text("a\n")
    (path / "sub").mkdir()
    (path / "sub" / "b.txt").write_text("b\n")
    yield path
    sandbox.remove_tree(path)


def test_a_passing_check_runs_on_a_copy_as_the_grader_uid(sandbox: Sandbox, tree: Path) -> None:
    check = ("import os\nassert open('a.txt').read() == 'a\\n' and open('sub/b.txt').read() == 'b\\n'\n"
             f"assert os.path.realpath(os.getcwd()) != {str(tree.resolve())!r}\n"
             "open('a.txt', 'w').write('changed')\n")
    verdict = grade_copy(sandbox, check, tree=tree)
    assert verdict.passed and verdict.error == "", verdict.to_dict()
    assert (tree / "a.txt").read_text() == "a\n"  # the agent's tree is never the one graded or changed
    if os.geteuid() == 0:
        assert verdict.grader_uid in sandbox.grader_uids and verdict.tmp.startswith("private")
    else:
        assert verdict.grader_uid is None
    assert not any(p.name.startswith("grade-") for p in sandbox.root.iterdir())  # the folder is gone


@pytest.mark.parametrize(("check", "why"), [
    ("assert 1 == 2, 'the answer is 42'\n", r"exit code 1\): AssertionError$"),
    ("import time\ntime.sleep(30)\n", "wall-clock limit"),
    ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n", r"crashed \(SIGKILL\)"),
    ("import os\nos._exit(0)\n", "wrote no verdict"),
    ("import os\nos.write(200, b'openenv-verdict pass 0\\n')\n", "malformed"),
    ("import os, sys\nos.write(200, sys._getframe(1).f_globals['_line'])\n", "more than one verdict"),
    ("print('x' * 10)\nimport os\nos.write(200, b'y' * 100000)\n", "malformed|crashed"),
])
def test_anything_but_one_clean_verdict_fails_closed_naming_why(sandbox: Sandbox, check: str, why: str) -> None:
    verdict = grade_copy(sandbox, check, files={"x.py": "X = 1\n"}, limits=Limits(wall_time_s=1.0, cpu_time_s=1))
    assert not verdict.passed and re.search(why, verdict.error), verdict.error
    assert "42" not in verdict.error  # the check's own message is not repeated to the agent


def test_sys_exit_zero_passes_and_the_verdict_pipe_is_not_inherited(sandbox: Sandbox) -> None:
    check = ("import subprocess, sys\n"
             "done = subprocess.run(['/bin/sh', '-c', 'echo openenv-verdict >&200'], capture_output=True)\n"
             "assert done.returncode != 0, 'a process the check started could write the verdict pipe'\n"
             "sys.exit(0)\n")
    verdict = grade_copy(sandbox, check)
    assert verdict.passed, verdict.error


def test_a_check_hands_back_a_payload_only_when_asked(sandbox: Sandbox) -> None:
    check = "__openenv_payload__ = '[1, 2]' + ' \u00e9'\n"
    verdict = grade_copy(sandbox, check, payload=True)
    assert verdict.passed and verdict.payload == "[1, 2] \u00e9", verdict.to_dict()
    assert grade_copy(sandbox, "x = 1\n", payload=True).payload == ""
    quiet = grade_copy(sandbox, check)  # not asked for: the wrapper sends none, the verdict is plain
    assert quiet.passed and quiet.payload == ""
    failed = grade_copy(sandbox, check + "assert False\n", payload=True)
    assert not failed.passed and failed.payload == ""


def test_the_copy_keeps_links_as_links_and_leaves_out_what_is_not_a_file(sandbox: Sandbox, tree: Path) -> None:
    os.symlink("/etc/hostname", tree / "out")
    os.symlink("sub", tree / "inner")
    os.mkfifo(tree / "fifo")
    os.link(tree / "a.txt", tree / "hard")
    (tree / "suid").write_text("s")
    (tree / "suid").chmod(0o4755)
    dest = sandbox.root / "copy-test"
    try:
        trees.copy(tree, dest)
        assert os.readlink(dest / "out") == "/etc/hostname" and os.readlink(dest / "inner") == "sub"
        assert not (dest / "fifo").exists() and not (dest / "hard").exists() and not (dest / "a.txt").exists()
        assert (dest / "sub" / "b.txt").read_text() == "b\n"
        assert stat.S_IMODE((dest / "suid").stat().st_mode) == 0o755
    finally:
        trees.remove(dest)
    with pytest.raises(trees.TreeTooLarge, match="more than 3 entries"):
        trees.copy(tree, dest, max_files=3)
    assert not dest.exists()
    verdict = grade_copy(sandbox, "pass", tree=tree, max_files=3)
    assert not verdict.passed and "could not be copied" in verdict.error


def test_git_hooks_and_command_config_are_dropped_from_the_copy(sandbox: Sandbox, tree: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tree), "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null"}
    for args in (["init", "-q"], ["add", "-A"], ["-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "x"]):
        subprocess.run(["git", *args], cwd=tree, env=env, check=True, capture_output=True, timeout=30)
    hook = "#!/bin/sh\necho ran > \"$(git rev-parse --show-toplevel)/hook-ran\"\n"
    for name in ("post-index-change", "post-checkout"):
        (tree / ".git" / "hooks" / name).write_text(hook)
        (tree / ".git" / "hooks" / name).chmod(0o755)
    with (tree / ".git" / "config").open("a") as config:
        config.write("[core]\n\tfsmonitor = .git/hooks/post-checkout\n[alias]\n\tst = !touch hook-ran\n")
    (tree / "a.txt").write_text("changed\n")
    check = ("import os, subprocess\n"
             "for args in (['status', '--porcelain'], ['st'], ['update-index', '--refresh']):\n"
             "    subprocess.run(['git', *args], capture_output=True, timeout=10)\n"
             "assert not os.path.exists('hook-ran'), 'a hook ran'\n")
    verdict = grade_copy(sandbox, check, tree=tree, env=env, git=True)
    assert verdict.passed, verdict.error
    undefused = grade_copy(sandbox, check, tree=tree, env=env)  # the same without git=True: a hook runs
    assert not undefused.passed and undefused.result is not None and "a hook ran" in undefused.result.stderr
    assert (tree / ".git" / "hooks" / "post-index-change").exists()  # the tree itself is untouched


@root_only
def test_tmp_is_private_and_nothing_of_the_grader_survives(sandbox: Sandbox, tree: Path) -> None:
    planted = sandbox.run_command("echo 1 > /tmp/openenv-grading-test-planted && echo ok")
    try:
        assert planted.stdout == "ok\n"
        check = ("import os, subprocess\n"
                 "assert not os.path.exists('/tmp/openenv-grading-test-planted')\n"
                 "subprocess.Popen(['/bin/sh', '-c', 'sleep 30'], start_new_session=True)\n"
                 "open('/tmp/from-the-grader', 'w').write('x')\n")
        verdict = grade_copy(sandbox, check, tree=tree)
        assert verdict.passed, verdict.error
        assert not Path("/tmp/from-the-grader").exists()
        assert processes_of(sandbox.grader_uids) == [] and processes_of(sandbox.uids) == []
    finally:
        Path("/tmp/openenv-grading-test-planted").unlink(missing_ok=True)
