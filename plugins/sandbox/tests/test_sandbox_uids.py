"""The sandbox's uids are leased machine-wide: two sandboxes on one host (two server processes,
``serve --workers``) never run executions as the same uid, so one's sweep cannot kill the other's
run; a lease ends with its holder, however it ends; when every block is held the error says what to
do."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
import threading
import uuid
from pathlib import Path

import pytest

from openenv_sandbox import GRADER_UID_OFFSET, Limits, Sandbox
from openenv_sandbox.uids import lease_uids

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="dropping privileges needs root")


def _holder(path: Path, base: int, count: int) -> subprocess.Popen[str]:
    """Another process holding the first free block from ``base`` until its stdin closes."""
    code = textwrap.dedent(f"""
        import sys
        from openenv_sandbox.uids import lease_uids
        lease = lease_uids({base}, {count}, grader_offset=None, path={str(path)!r})
        print(lease.agents.start, flush=True)
        sys.stdin.read()
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == str(base)
    return proc


def test_blocks_are_exclusive_across_processes_and_free_again_when_the_holder_dies(tmp_path: Path) -> None:
    lock = tmp_path / "uids.lock"
    other = _holder(lock, 5000, 4)
    try:
        mine = lease_uids(5000, 4, grader_offset=None, path=str(lock))
        assert mine.held and mine.agents == range(5004, 5008)  # the next block
        other.kill()  # no clean-up at all: the kernel drops its lease
        other.wait()
        again = lease_uids(5000, 4, grader_offset=None, path=str(lock))
        assert again.agents == range(5000, 5004)
        again.close()
        mine.close()
    finally:
        if other.poll() is None:
            other.kill()
            other.wait()


def test_leases_of_one_process_exclude_each_other_and_overlapping_blocks_conflict(tmp_path: Path) -> None:
    lock = str(tmp_path / "uids.lock")
    first = lease_uids(100, 10, grader_offset=None, path=lock)
    second = lease_uids(100, 10, grader_offset=None, path=lock)  # same process: no merging
    assert (first.agents, second.agents) == (range(100, 110), range(110, 120))
    # another base and size: the blocks 105.., 109.., 113.., 117.. overlap 100..119; 121..124 is free
    assert lease_uids(105, 4, grader_offset=None, path=lock).agents == range(121, 125)
    first.close()
    assert lease_uids(100, 10, grader_offset=None, path=lock).agents == range(100, 110)
    second.close()


def test_grader_uids_are_leased_with_their_block(tmp_path: Path) -> None:
    lock = str(tmp_path / "uids.lock")
    # an agent block sitting on 2000..2003 (another base's) keeps the block whose graders those are
    squatter = lease_uids(2000, 4, grader_offset=None, path=lock)
    lease = lease_uids(0, 4, grader_offset=2000, path=lock)
    assert lease.agents == range(4, 8) and lease.graders == range(2004, 2008)
    squatter.close()
    lease.close()


def test_every_block_held_is_a_clear_error(tmp_path: Path) -> None:
    lock = str(tmp_path / "uids.lock")
    held = [lease_uids(1000, 1000, grader_offset=2000, path=lock) for _ in range(2)]  # the two blocks there are
    assert [h.agents.start for h in held] == [1000, 2000]
    with pytest.raises(RuntimeError, match=r"every block of 1000 sandbox uids between 1000 and 2999 is leased.*"
                                           r"fewer slots.*OPENENV_SANDBOX_UID_BASE"):
        lease_uids(1000, 1000, grader_offset=2000, path=lock)
    for h in held:
        h.close()


def test_an_unusable_lease_file_warns_and_keeps_the_uids(tmp_path: Path) -> None:
    with pytest.warns(UserWarning, match="not leased"):
        lease = lease_uids(300, 2, grader_offset=2000, path=str(tmp_path / "missing" / "uids.lock"))
    assert not lease.held and lease.agents == range(300, 302) and lease.graders == range(2300, 2302)


def test_a_lock_file_others_may_open_is_not_used(tmp_path: Path) -> None:
    """A sandboxed process may write /tmp (the fallback folder): a lock file it planted there,
    which it could hold to keep every block, is refused."""
    planted = tmp_path / "uids.lock"
    planted.write_text("")
    planted.chmod(0o666)
    with pytest.warns(UserWarning, match=r"not a private file .*-rw-rw-rw-.*not leased"):
        lease = lease_uids(400, 2, grader_offset=None, path=str(planted))
    assert not lease.held and lease.agents == range(400, 402)


@root_only
def test_two_sandboxes_with_one_uid_base_never_share_a_uid() -> None:
    with Sandbox(slots=2, uid_base=62700) as a, Sandbox(slots=2, uid_base=62700) as b:
        assert a.uids == range(62700, 62702) and b.uids == range(62702, 62704)
        assert a.grader_uids == range(62700 + GRADER_UID_OFFSET, 62702 + GRADER_UID_OFFSET)
        assert b.grader_uids == range(62702 + GRADER_UID_OFFSET, 62704 + GRADER_UID_OFFSET)
        assert a.run_command("id -u").stdout.strip() == "62700"
        assert b.run_command("id -u").stdout.strip() == "62702"
    with Sandbox(slots=2, uid_base=62700) as c:  # closing gave the uids back
        assert c.uids == range(62700, 62702)


@root_only
def test_another_processes_sandbox_does_not_kill_a_running_execution() -> None:
    """The bug leases fix: a run that leaves a process behind is swept with ``kill -1`` as its uid.
    Two server processes whose sandboxes had the same uids killed each other's running executions."""
    go = Path(tempfile.gettempdir()) / f"openenv-uids-test-{uuid.uuid4().hex}"  # /tmp: the run may see it
    with Sandbox(Limits(wall_time_s=30.0), slots=1, uid_base=62710) as box:
        results: list[object] = []
        waiting = f"while [ ! -e {go} ]; do sleep 0.05; done; echo finished"  # runs until the other is done
        runner = threading.Thread(target=lambda: results.append(box.run_command(waiting)))
        runner.start()
        other = subprocess.run(
            [sys.executable, "-c", textwrap.dedent("""
                from openenv_sandbox import Sandbox
                with Sandbox(slots=1, uid_base=62710) as box:
                    ran = box.run_command("(sleep 30 &); id -u")  # a leftover: swept as the run's uid
                    print(ran.stdout.strip(), ran.exit_code)
            """)],
            capture_output=True, text=True, timeout=60)
        go.touch()
        runner.join(30)
        go.unlink()
        (result,) = results
        assert result.ok and result.stdout == "finished\n", result  # type: ignore[attr-defined]
        assert other.returncode == 0, other.stderr
        assert other.stdout.split() == ["62711", "0"]  # the next block: 62710 is this process's
