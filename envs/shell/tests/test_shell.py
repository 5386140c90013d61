"""The shell env: seeded git trees, sandboxed commands, checks outside the tree, cleanup."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import openenv_env_shell.plugin
from openenv.errors import ValidationError
from openenv.sessions import SessionManager
from openenv.testing import EnvContract, check_registered
from openenv_env_shell.env import ShellAction, ShellEnv, load_tasks
from openenv_sandbox import Sandbox
from openenv_sandbox.host import processes_of

UIDS = range(62500, 62508)
root_only = pytest.mark.skipif(os.geteuid() != 0, reason="dropping privileges needs root")


@pytest.fixture(scope="module")
def sandbox() -> Iterator[Sandbox]:
    box = Sandbox(slots=8, uid_base=UIDS.start)
    yield box
    box.close()


def test_registered_lazily_as_shell() -> None:
    check_registered(openenv_env_shell.plugin, "shell", "openenv_env_shell.env:ShellEnv")


def test_reset_seeds_a_git_repository_from_the_task(sandbox: Sandbox) -> None:
    env = ShellEnv(sandbox=sandbox)
    try:
        obs = env.reset(task_id="commit-notes")
        tree = Path(obs.cwd)
        assert tree == env.tree and (tree / ".git").is_dir()
        log = subprocess.run(["git", "-C", str(tree), "log", "--format=%s"], capture_output=True, text=True,
                             check=True).stdout
        assert log.strip() == "task commit-notes"
        status = env.step(ShellAction(command="git status --porcelain"))
        assert status.stdout == " M notes.txt\n" and not status.solved
    finally:
        env.close()


@pytest.mark.parametrize("task", [t.id for t in load_tasks()])
def test_every_task_is_solved_by_its_solution_and_not_by_doing_nothing(sandbox: Sandbox, task: str) -> None:
    env = ShellEnv(sandbox=sandbox)
    try:
        env.reset(task_id=task)
        idle = env.step(ShellAction(command="true"))
        assert not idle.solved and idle.reward == 0.0 and not idle.done
        solution = next(t.solution for t in load_tasks() if t.id == task)
        obs = env.step(ShellAction(command=solution))
        assert obs.solved and obs.reward == 1.0 and obs.done, obs
    finally:
        env.close()


def test_editing_the_repos_own_test_does_not_pass_the_check(sandbox: Sandbox) -> None:
    env = ShellEnv(sandbox=sandbox)
    try:
        env.reset(task_id="fix-add")
        obs = env.step(ShellAction(command="echo \"print('ok')\" > test_calc.py && python3 test_calc.py"))
        assert obs.stdout == "ok\n" and not obs.solved  # the check lives outside the tree
    finally:
        env.close()


@root_only
def test_the_tree_is_per_session_and_nothing_outlives_the_session(sandbox: Sandbox) -> None:
    first, second = ShellEnv(sandbox=sandbox), ShellEnv(sandbox=sandbox)
    first.reset(task_id="make-file")
    second.reset(task_id="make-file")
    assert first.tree != second.tree
    first.step(ShellAction(command="echo secret > mine.txt; (setsid sleep 600 &); sleep 600 &"))
    peek = second.step(ShellAction(command=f"ls mine.txt; cat {first.tree}/mine.txt"))
    assert peek.exit_code != 0 and "secret" not in peek.stdout
    assert processes_of(sandbox.uids) == []
    tree = first.tree
    assert tree is not None
    first.close()
    second.close()
    assert not tree.exists() and processes_of(sandbox.uids) == []


def test_the_step_budget_ends_the_episode(sandbox: Sandbox) -> None:
    env = ShellEnv(sandbox=sandbox, max_steps=2)
    try:
        env.reset(task_id="make-file")
        assert not env.step(ShellAction(command="true")).done
        last = env.step(ShellAction(command="true"))
        assert last.done and last.reward == 0.0 and last.steps_left == 0
        assert "episode is over" in env.step(ShellAction(command="true")).stderr
    finally:
        env.close()


def test_bad_input(sandbox: Sandbox, tmp_path: Path) -> None:
    env = ShellEnv(sandbox=sandbox)
    with pytest.raises(ValidationError, match="call reset"):
        env.step(ShellAction(command="true"))
    with pytest.raises(ValidationError, match="Did you mean 'fix-add'"):
        env.reset(task_id="fix-ad")
    bad = tmp_path / "t.jsonl"
    bad.write_text(json.dumps({"id": "x"}) + "\n")
    with pytest.raises(ValueError, match="id, instructions and check"):
        load_tasks(bad)


def test_keeps_the_kit_env_contract_but_seeding() -> None:
    contract = EnvContract(ShellEnv, volatile_fields=["duration_s", "grader_uid", "cwd"])  # the manifest's
    for check in (contract.check_reset, contract.check_step, contract.check_invalid_action, contract.check_close,
                  contract.check_concurrent_sessions, contract.check_snapshot, contract.check_served):
        check()
    # The kit's check_seeding compares whole first observations, but every session gets its own
    # working tree, so `cwd` differs by design: the same seed gives the same episode but for it.
    one, two = ShellEnv(), ShellEnv()
    try:
        first, second = one.reset(seed=1), two.reset(seed=1)
        assert first.cwd != second.cwd
        assert first.model_dump(exclude={"cwd"}) == second.model_dump(exclude={"cwd"})
    finally:
        one.close()
        two.close()


async def test_served_through_the_session_manager() -> None:
    manager = SessionManager(ShellEnv, max_sessions=2, idle_timeout_s=None)
    try:
        session = await manager.open()
        await manager.reset(session, {"task_id": "make-file"})
        obs = await manager.step(session, {"command": "echo 'hello world' > hello.txt"})
        assert obs.solved and obs.done
        with pytest.raises(ValidationError):
            await manager.step(session, {"command": ""})
    finally:
        await manager.shutdown()


def test_metadata_reports_the_sandbox_in_use(sandbox: Sandbox) -> None:
    md = ShellEnv(sandbox=sandbox).get_metadata().model_dump()
    assert md["name"] == "shell" and md["sandbox"]["runner"].startswith("warm zygote")
    if os.geteuid() == 0:
        assert sandbox.uids is not None and len(sandbox.uids) == 8
        # the block leased for this sandbox: 62500..62507 unless another worker's fixture holds it
        assert f"{sandbox.uids.start}..{sandbox.uids.stop - 1}" in md["sandbox"]["privileges"]
        assert md["sandbox"]["network"].startswith("none")


def test_a_snapshot_carries_the_tree_and_a_hostile_one_is_refused() -> None:
    import base64
    import io
    import tarfile

    env, other = ShellEnv(), ShellEnv()
    try:
        env.reset(seed=1)
        env.step(ShellAction(command="echo kept > note.txt && git add note.txt"))
        snap = env.snapshot()
        other.restore(snap)
        assert other.tree is not None and (other.tree / "note.txt").read_text() == "kept\n"
        assert other.step(ShellAction(command="git status --short")).stdout.strip() == "A  note.txt"
        # A tree whose member escapes it (../) is refused by the unpacking filter; nothing is left.
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            member = tarfile.TarInfo("../escaped.txt")
            member.size = 1
            tar.addfile(member, io.BytesIO(b"x"))
        bad = {**snap, "tree": base64.b64encode(buffer.getvalue()).decode()}
        with pytest.raises(ValueError, match="does not unpack"):
            ShellEnv().restore(bad)
        with pytest.raises(ValueError, match="not a shell snapshot"):
            other.restore({**snap, "steps": -1})
    finally:
        env.close()
        other.close()
