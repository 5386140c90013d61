"""Task checks cannot be fooled by files the agent plants in its tree: the check never imports from
the tree, runs the agent's code only in a probe process of its own, and compares data it chose."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from openenv_env_shell.env import ShellAction, ShellEnv
from openenv_sandbox import Sandbox

UIDS = range(62520, 62524)

SHADOW_SUBPROCESS = """cat > subprocess.py <<'EOF'
class _Done:
    def __init__(self, stdout):
        self.stdout = stdout
def run(args, **kwargs):
    return _Done('update notes' if 'log' in args else '')
EOF"""
SHADOW_EVERY_ANSWER = """cat > subprocess.py <<'EOF'
class _Done:
    def __init__(self, stdout):
        self.stdout = stdout
def run(args, **kwargs):
    if 'log' in args:
        return _Done('update notes')
    return _Done('first note\\nsecond note\\n' if 'show' in args else '')
EOF"""
EXIT_ZERO = "import os; os._exit(0)\n"
PLANTS = " && ".join(
    f"printf '{EXIT_ZERO}' > {name}"
    for name in ("sitecustomize.py", "usercustomize.py", "json.py", "random.py", "ctypes.py", "secrets.py"))
FAKE_GIT = "printf '#!/bin/sh\\necho update notes\\n' > git && chmod +x git"

ATTACKS = {
    # the audit's reproduction: a subprocess.py in the tree answered the check's git calls
    "shadow subprocess": ("commit-notes", SHADOW_SUBPROCESS),
    "shadow subprocess answering every call": ("commit-notes", SHADOW_EVERY_ANSWER),
    "module that exits 0 on import": ("fix-add", f"printf '{EXIT_ZERO}' > calc.py"),
    "always-equal result": ("fix-add", "printf 'class E(int):\\n    __eq__ = lambda *a: True\\n"
                                       "def add(a, b):\\n    return E(0)\\nmul = add\\n' > calc.py"),
    "empty commit, change hidden from status": (
        "commit-notes",
        "git commit -q --allow-empty -m 'update notes' && git update-index --assume-unchanged notes.txt"),
    "planted site, pth and stdlib names, fake git": (
        "commit-notes", f"{PLANTS} && printf '{EXIT_ZERO}' > x.pth && {FAKE_GIT} && mkdir -p bin && cp git bin/"),
    "planted stdlib names for the probe": ("fix-greeting", PLANTS),
}


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    box = Sandbox(slots=4, uid_base=UIDS.start)
    yield box
    box.close()


@pytest.mark.parametrize("name", list(ATTACKS))
def test_a_planted_file_does_not_pass_the_check(sandbox: Sandbox, name: str) -> None:
    task, command = ATTACKS[name]
    env = ShellEnv(sandbox=sandbox)
    try:
        env.reset(task_id=task)
        obs = env.step(ShellAction(command=command))
        assert obs.exit_code == 0, obs.stderr
        assert not obs.solved and obs.reward == 0.0
    finally:
        env.close()


def test_limits_are_configurable_and_reported(sandbox: Sandbox) -> None:
    from openenv_sandbox import Limits

    tight = Limits(wall_time_s=1.0, cpu_time_s=1, output_bytes=1024)
    env = ShellEnv(sandbox=sandbox, limits=tight)
    try:
        first = env.reset(task_id="make-file")
        assert first.limits == tight.to_dict() and first.duration_s == 0.0
        slow = env.step(ShellAction(command="sleep 5"))
        assert slow.timed_out and slow.killed_by == "wall_time" and 0.9 < slow.duration_s < 3
        assert slow.limits == tight.to_dict()
        loud = env.step(ShellAction(command="head -c 5000 /dev/zero | tr '\\0' x"))
        assert len(loud.stdout) < 1200 and "truncated at 1024 bytes" in loud.stdout
    finally:
        env.close()
    with pytest.raises(TypeError, match=r"openenv_sandbox\.Limits"):
        ShellEnv(sandbox=sandbox, limits={"wall_time_s": 1})  # type: ignore[arg-type]
