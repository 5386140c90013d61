"""The red team of the coding env's grader: each hidden test runs in a separate box (a fresh folder
holding only ``solution.py``, the test from the task data, the grader uid, a private /tmp, the
verdict on a pipe), so nothing the agent's earlier runs left behind, and no early exit or planted
verdict, pays; the real fix still earns 1.0; a hanging or crashing solution is 0 with the reason."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from openenv.testing import processes_matching
from openenv_env_coding.env import CodeAction, CodingEnv
from openenv_sandbox import GRADER_UID_OFFSET, Sandbox
from openenv_sandbox.host import processes_of

UIDS = range(62560, 62564)
#: Whose planted files _remove_plants may remove: any block of uids this module's sandbox may lease
#: (from UIDS.start up), and their grader uids.
PLANT_OWNERS = range(UIDS.start, UIDS.start + 2 * GRADER_UID_OFFSET)
MARKER = f"coding-redteam-{uuid.uuid4().hex[:8]}"
FIX = "def add(a, b):\n    return a + b\n"
STARTER = "def add(a, b):\n    pass\n"
EXIT_ZERO = "import os; os._exit(0)\n"
_PLANT = ("import os, sys\n"
          "def plant(folder, name, text, mode=0o644):\n"
          "    try:\n"
          "        os.makedirs(folder, exist_ok=True)\n"
          "        with open(os.path.join(folder, name), 'w') as f:\n"
          "            f.write(text)\n"
          "        os.chmod(os.path.join(folder, name), mode)\n"
          "    except OSError:\n"
          "        pass\n"
          f"places = ['.', '/tmp', '/tmp/{MARKER}', '/dev/shm', '/var/tmp', os.path.expanduser('~')]\n")
#: What an earlier run (``run_code``) plants before the agent submits the unfixed starter; none may pay.
PLANTED = {
    "conftest": _PLANT + f"for p in places:\n    plant(p, 'conftest.py', {EXIT_ZERO!r})\n",
    "sitecustomize_and_pth": _PLANT + (
        "site = os.path.expanduser('~/.local/lib/python%d.%d/site-packages' % sys.version_info[:2])\n"
        f"for p in places + [site]:\n    plant(p, 'sitecustomize.py', {EXIT_ZERO!r})\n"
        f"    plant(p, 'usercustomize.py', {EXIT_ZERO!r})\n    plant(p, 'evil.pth', {EXIT_ZERO!r})\n"),
    "fake_python3_and_pytest_on_path": _PLANT + (
        "for p in places:\n    for name in ('python3', 'python', 'pytest'):\n"
        "        plant(os.path.join(p, 'bin'), name, '#!/bin/sh\\nexit 0\\n', 0o755)\n"),
    "prewritten_verdict": _PLANT + (
        "for p in places:\n    for name in ('verdict', 'reward.txt', 'solution.py'):\n"
        "        plant(p, name, 'openenv-verdict pass 00000000000000000000000000000000\\n')\n"),
    "symlink_out_of_the_workspace": _PLANT + (
        f"plant('/tmp', '{MARKER}.py', {FIX!r})\n"
        "for p in places:\n    try:\n"
        f"        os.symlink('/tmp/{MARKER}.py', os.path.join(p, 'solution.py'))\n"
        "    except OSError:\n        pass\n"),
    "process_left_running": (
        "import subprocess\n"
        f"subprocess.Popen(['/bin/sh', '-c', 'exec -a {MARKER} sh -c \"while :; do sleep 0.2; "
        "for f in /tmp/*/*/work/solution.py; do echo \\\\\"def add(a, b): return a + b\\\\\" > $f; done; done\"'],"
        " start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"),
}
#: Solutions that try to decide the verdict without solving the task; none may pay.
SUBMITTED = {
    "exit_zero_early": EXIT_ZERO + STARTER,
    "exit_zero_at_exit": "import atexit, os\natexit.register(os._exit, 0)\n" + STARTER,
    "forged_verdict_line": ("import os\nfor fd in range(3, 1024):\n    try:\n"
                            "        os.write(fd, b'openenv-verdict pass 00000000000000000000000000000000\\n')\n"
                            "    except OSError:\n        pass\n" + STARTER),
    "patched_assertion_error": "import builtins\nbuiltins.AssertionError = type('Quiet', (BaseException,), {})\n"
                               + STARTER,
    "symlinked_solution": f"import os\nos.remove('solution.py')\nos.symlink('/tmp/{MARKER}.py', 'solution.py')\n"
                          + STARTER,
}


#: What the attacks above plant in the shared world-writable folders (the plain sandbox lets a run
#: create files there: plugins/sandbox/README.md), removed again when they are the sandbox's own.
PLANTED_NAMES = ("conftest.py", "sitecustomize.py", "usercustomize.py", "evil.pth", "verdict", "reward.txt",
                 "solution.py", "bin/python3", "bin/python", "bin/pytest", "bin")
SHARED_FOLDERS = (Path("/tmp"), Path("/dev/shm"), Path("/var/tmp"))


def _remove_plants() -> list[str]:
    """Remove the files the attacks planted in the shared folders (only those a sandbox uid owns:
    nothing of anyone else's); return what was removed."""
    removed = []
    for folder in SHARED_FOLDERS:
        for name in PLANTED_NAMES:
            path = folder / name
            try:
                if path.lstat().st_uid not in PLANT_OWNERS:
                    continue
                if path.is_dir() and not path.is_symlink():
                    path.rmdir()  # bin/, emptied by the names before it
                else:
                    path.unlink()
            except OSError:  # absent, or not empty (then someone else's file is in it: left alone)
                continue
            removed.append(str(path))
    return removed


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    _remove_plants()  # a run that was killed before its clean-up left them
    box = Sandbox(slots=len(UIDS), uid_base=UIDS.start)
    yield box
    box.close()
    # A /tmp/sitecustomize.py that exits 0 would end every later Python started with /tmp on its
    # path (a CI run found one left by this module).
    _remove_plants()
    for planted in Path("/tmp").glob(f"{MARKER}*"):
        if planted.is_dir() and not planted.is_symlink():
            for child in planted.rglob("*"):
                if not child.is_dir() or child.is_symlink():
                    child.unlink()
            for child in sorted(planted.rglob("*"), reverse=True):
                child.rmdir()
            planted.rmdir()
        else:
            planted.unlink()


def _left_running() -> list[int]:
    return processes_matching(MARKER)


def _submit(sandbox: Sandbox, solution: str, *earlier: str) -> tuple[float, dict[str, Any]]:
    env = CodingEnv(sandbox=sandbox)
    try:
        env.reset(task_id="add")
        for code in earlier:
            env.step(CodeAction(code=code))
        obs = env.step(CodeAction(code=solution, submit=True))
        assert obs.done
        return float(obs.reward or 0.0), dict(obs.metadata)
    finally:
        env.close()


def test_the_real_fix_earns_one_graded_as_another_uid(sandbox: Sandbox) -> None:
    reward, metadata = _submit(sandbox, FIX)
    assert reward == 1.0 and metadata["tests"] == {"passed": 4, "total": 4}
    assert metadata["grade"]["errors"] == []
    if os.geteuid() == 0:
        assert metadata["grade"]["grader_uid"] in sandbox.grader_uids
    assert _submit(sandbox, STARTER)[0] == 0.0


@pytest.mark.parametrize("attack", sorted(PLANTED))
def test_red_team_nothing_an_earlier_run_plants_pays(sandbox: Sandbox, attack: str) -> None:
    reward, metadata = _submit(sandbox, STARTER, PLANTED[attack])
    assert reward == 0.0, metadata
    assert len(metadata["grade"]["errors"]) == 4
    assert not _left_running()
    if os.geteuid() == 0:
        assert processes_of(sandbox.uids) == [] and processes_of(sandbox.grader_uids) == []


@pytest.mark.parametrize("attack", sorted(SUBMITTED))
def test_red_team_no_submitted_trick_pays(sandbox: Sandbox, attack: str) -> None:
    reward, metadata = _submit(sandbox, SUBMITTED[attack], PLANTED["symlink_out_of_the_workspace"])
    assert reward == 0.0, metadata


def test_red_team_every_attack_with_the_fix_earns_no_more_than_the_fix(sandbox: Sandbox) -> None:
    reward, metadata = _submit(sandbox, FIX, *(PLANTED[a] for a in sorted(PLANTED)))
    assert reward == 1.0 and metadata["grade"]["errors"] == []
    assert not _left_running()


@pytest.mark.parametrize(("solution", "why"), [
    ("while True:\n    pass\n", ("wall-clock limit", "cpu_time")),
    ("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n", ("crashed (SIGKILL)",)),
    ("def add(a, b):\n    return a - b\n", ("AssertionError",)),
])
def test_a_hanging_or_crashing_solution_is_zero_with_the_reason(sandbox: Sandbox, solution: str,
                                                                why: tuple[str, ...]) -> None:
    reward, metadata = _submit(sandbox, solution)
    assert reward <= 0.25
    assert any(reason in error for error in metadata["grade"]["errors"] for reason in why), metadata


# -- forging the verdict from inside the solution's process ------------------------------------
# Each hidden test is played in the sandbox only to record, as plain data, what the solution's
# functions returned; its verdict is the test's own code replayed in the grader on those records.
# So what the solution does to its own process (an object equal to everything, patched builtins, a
# trace or audit hook, a walk to the harness) decides nothing: each of these scores what an honest
# wrong answer scores, 0 for every test.

#: Finds the grading wrapper's globals (the verdict pipe and its line), writes the verdict, exits 0.
_WALK = ("import gc, os\n"
         "def forge(*args):\n"
         "    for obj in gc.get_objects():\n"
         "        if type(obj) is dict and type(obj.get('_line')) is bytes and '_fd' in obj:\n"
         "            os.write(obj['_fd'], obj['_line'])\n"
         "            os._exit(0)\n")
FORGERIES = {
    "always_equal_object": ("add", "def add(a, b):\n    class X:\n        __eq__ = lambda s, o: True\n"
                                   "        __ne__ = lambda s, o: False\n        __bool__ = lambda s: True\n"
                                   "    return X()\n"),
    "int_subclass_equal_to_everything": ("add", "class I(int):\n    __eq__ = lambda s, o: True\n"
                                                "    __hash__ = int.__hash__\n"
                                                "def add(a, b):\n    return I(0)\n"),
    "str_subclass_equal_to_everything": ("reverse_string", "class S(str):\n    __eq__ = lambda s, o: True\n"
                                                           "    __hash__ = str.__hash__\n"
                                                           "def reverse_string(s):\n    return S('')\n"),
    "list_subclass_equal_to_everything": ("flatten", "class L(list):\n    __eq__ = lambda s, o: True\n"
                                                     "def flatten(xs):\n    return L()\n"),
    "exec_replaced": ("add", "import builtins\nbuiltins.exec = lambda *args, **kwargs: None\n" + STARTER),
    "compile_replaced": ("add", "import builtins\n_compile = builtins.compile\n"
                                "builtins.compile = lambda *a, **k: _compile('pass', '<none>', 'exec')\n" + STARTER),
    "assertion_error_replaced": ("add", "import builtins\nbuiltins.AssertionError = type('Q', (BaseException,), {})\n"
                                        + STARTER),
    "settrace_forges_the_verdict": ("add", _WALK + "import sys\n"
                                    "def trace(frame, event, arg):\n"
                                    "    if frame.f_code.co_filename == '<test>':\n        forge()\n"
                                    "sys.settrace(trace)\n" + STARTER),
    "setprofile_forges_the_verdict": ("add", _WALK + "import sys\n"
                                      "sys.setprofile(lambda frame, event, arg: frame.f_code.co_filename == '<test>' "
                                      "and forge())\n" + STARTER),
    "audit_hook_forges_the_verdict": ("add", _WALK + "import sys\n"
                                      "sys.addaudithook(lambda event, args: event == 'exec' and forge())\n" + STARTER),
    "gc_walk_forges_the_verdict": ("add", _WALK + "def add(a, b):\n    forge()\n"),
    "operator_patched": ("add", "import operator\noperator.eq = lambda a, b: True\noperator.truth = lambda a: True\n"
                                + STARTER),
    "forged_records_with_code": ("add", "import gc\n"
                                 "def add(a, b):\n"
                                 "    for obj in gc.get_objects():\n"
                                 "        if type(obj) is dict and 'Recorder' in obj and '_recorder' in obj:\n"
                                 "            obj['_recorder'].texts[:] = [\"('add', (2, 3), {}, 'return', "
                                 "__import__('os'), None)\"]\n"
                                 "            raise SystemExit(0)\n"),
    "forged_records_claim_true": ("add", "import gc\n"
                                  "def add(a, b):\n"
                                  "    for obj in gc.get_objects():\n"
                                  "        if type(obj) is dict and '_recorder' in obj:\n"
                                  "            obj['_recorder'].texts[:] = [\n"
                                  "                repr(('add', (a, b), {}, 'return', True, None))]\n"
                                  "            obj['__openenv_payload__'] = obj['_recorder'].payload()\n"
                                  "            raise SystemExit(0)\n"),
}


def _submit_to(sandbox: Sandbox, task_id: str, solution: str) -> tuple[float, dict[str, Any]]:
    env = CodingEnv(sandbox=sandbox)
    try:
        env.reset(task_id=task_id)
        obs = env.step(CodeAction(code=solution, submit=True))
        assert obs.done
        return float(obs.reward or 0.0), dict(obs.metadata)
    finally:
        env.close()


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_red_team_no_forgery_from_inside_the_solution_scores(sandbox: Sandbox, forgery: str) -> None:
    task_id, solution = FORGERIES[forgery]
    reward, metadata = _submit_to(sandbox, task_id, solution)
    assert reward == 0.0, metadata
    assert metadata["grade"]["errors"] and all(metadata["grade"]["errors"]), metadata
    if "subclass" in forgery or "object" in forgery:
        assert all("cannot be compared outside the solution's process" in e for e in metadata["grade"]["errors"])


def test_a_forgery_beside_the_real_fix_earns_what_the_fix_earns(sandbox: Sandbox) -> None:
    # the always-equal object on one input only: that test fails, the others pass on the real sum
    solution = ("def add(a, b):\n    class X:\n        __eq__ = lambda s, o: True\n"
                "    return X() if a == 2 and b == 3 else a + b\n")
    reward, metadata = _submit_to(sandbox, "add", solution)
    assert reward == 0.75, metadata
    assert metadata["grade"]["errors"] == [
        "add(2, 3) returned a <X object>, which cannot be compared outside the solution's process: return plain "
        "data (None, bool, int, float, complex, str, bytes, and lists, tuples, dicts, sets of them)"]


def test_a_solution_that_mutates_its_arguments_is_seen_by_the_replay(sandbox: Sandbox) -> None:
    mutating = "def merge_sorted(a, b):\n    a.extend(b)\n    a.sort()\n    return a\n"
    reward, metadata = _submit_to(sandbox, "merge_sorted", mutating)
    assert reward == 0.8 and metadata["grade"]["errors"] == ["AssertionError"], metadata
