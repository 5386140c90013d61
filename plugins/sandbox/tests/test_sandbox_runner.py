"""The runner's contract: fresh state per execution, reported limits and boundary, the pool and
its fallback, bad configuration refused with a message that says what to do."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

from openenv_sandbox import TRUNCATION_MARKER, Limits, Sandbox
from openenv_sandbox.host import processes_of

root_only = pytest.mark.skipif(os.geteuid() != 0, reason="dropping privileges needs root")


def test_print_runs_in_the_pool_and_reports_everything(sandbox: Sandbox) -> None:
    result = sandbox.run_python("print(1)")
    assert result.ok and result.stdout == "1\n" and result.stderr == "" and result.killed_by is None
    assert result.boundary["runner"] == "zygote" and result.duration_s > 0
    assert result.limits == sandbox.limits.to_dict() and result.limits["wall_time_s"] == 3.0
    assert result.boundary["pid"] != os.getpid()
    assert sandbox.boundary["runner"].startswith("warm zygote")


def test_no_execution_sees_another_executions_state(sandbox: Sandbox) -> None:
    first = sandbox.run_python("import builtins, os, sys\nbuiltins.LEAK = 1\nsys.modules['leak'] = 1\n"
                               "open('left-behind.txt', 'w').write('x')\nprint(os.getcwd())\n")
    assert first.ok
    second = sandbox.run_python("import builtins, json, os, sys\n"
                                "print(json.dumps([hasattr(builtins, 'LEAK'), 'leak' in sys.modules, os.listdir('.'),"
                                " os.getcwd()]))\n")
    assert second.ok
    leaked, in_modules, listing, cwd = json.loads(second.stdout)
    assert (leaked, in_modules, listing) == (False, False, [])
    assert cwd != first.stdout.strip() and not os.path.exists(first.stdout.strip())


def test_exit_codes_and_signals(sandbox: Sandbox) -> None:
    assert sandbox.run_python("raise SystemExit(3)").exit_code == 3
    assert sandbox.run_python("import sys; sys.exit('bad')").exit_code == 1
    failed = sandbox.run_python("1 / 0")
    assert failed.exit_code == 1 and "ZeroDivisionError" in failed.stderr
    killed = sandbox.run_python("import os, signal; os.kill(os.getpid(), signal.SIGTERM)")
    assert killed.exit_code == -signal.SIGTERM and killed.killed_by == "SIGTERM"


def test_commands_and_files(sandbox: Sandbox) -> None:
    result = sandbox.run_command("cat data.txt; echo err >&2; exit 4", files={"data.txt": "hello\n"})
    assert (result.exit_code, result.stdout, result.stderr) == (4, "hello\n", "err\n")
    missing = sandbox.run_command(["no-such-program-xyz"])
    assert missing.exit_code == 127 and "No such file" in missing.stderr
    with pytest.raises(ValueError, match="outside the working directory"):
        sandbox.run_python("pass", files={"../escape.txt": "x"})


def test_stderr_is_capped_too(sandbox: Sandbox) -> None:
    result = sandbox.run_python("import sys\nsys.stderr.write('e' * 100000)\n", limits=Limits(output_bytes=1000))
    assert result.stderr_truncated and result.stderr.endswith(TRUNCATION_MARKER.format(cap=1000))


@root_only
def test_persistent_workdir_survives_between_executions_only_for_its_owner(sandbox: Sandbox) -> None:
    tree = sandbox.make_tree()
    try:
        assert sandbox.run_command("echo one > notes.txt; sleep 600 &", workdir=tree).exit_code == 0
        assert processes_of(sandbox.uids) == []  # the background sleep did not survive
        again = sandbox.run_command("cat notes.txt; id -u", workdir=tree)
        assert again.stdout.splitlines()[0] == "one" and int(again.stdout.splitlines()[1]) in sandbox.uids
    finally:
        sandbox.remove_tree(tree)
    assert not tree.exists()


def test_fallback_without_the_pool_behaves_the_same() -> None:
    with Sandbox(Limits(wall_time_s=5.0), pool=False, slots=2, uid_base=62100) as box:
        result = box.run_python("import os\nprint(os.getuid() != 0 or os.geteuid() != 0, os.listdir('.'))")
        assert result.stdout == ("True []\n" if os.geteuid() == 0 else result.stdout)
        assert result.boundary["runner"] == "fresh interpreter"
        assert "pool unavailable: disabled by configuration" in box.boundary["runner"]
        slow = box.run_python("while True: pass", limits=Limits(wall_time_s=1.0))
        assert slow.timed_out and slow.killed_by == "wall_time"
        assert processes_of(box.uids) == []


def test_a_dead_zygote_is_replaced() -> None:
    with Sandbox(slots=2, uid_base=62200) as box:
        assert box.run_python("print(1)").ok
        assert box._zygote is not None
        box._zygote.proc.kill()
        box._zygote.proc.wait()
        result = box.run_python("print(2)")
        assert result.stdout == "2\n" and result.boundary["runner"] == "zygote"


def test_closing_the_sandbox_kills_what_still_runs() -> None:
    box = Sandbox(slots=2, uid_base=62300)
    uids = box.uids or range(0)
    results: list[object] = []
    worker = threading.Thread(target=lambda: results.append(
        box.run_python("import time; time.sleep(600)", limits=Limits(wall_time_s=60.0))))
    worker.start()
    deadline = time.monotonic() + 10
    while not processes_of(uids) and time.monotonic() < deadline:
        time.sleep(0.02)
    box.close()
    worker.join(15)
    assert not worker.is_alive() and processes_of(uids) == []


def test_bad_configuration_is_refused_with_a_way_out() -> None:
    with pytest.raises(ValueError, match="positive number"):
        Limits(wall_time_s=0)
    with pytest.raises(ValueError, match="whole seconds"):
        Limits(cpu_time_s=1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="slots must be at least 1"):
        Sandbox(slots=0)
    with pytest.raises(RuntimeError, match="pass python=None"):
        Sandbox(python="/root/definitely-not-here/python3")


@root_only
def test_one_execution_ending_never_kills_another_executions_processes(sandbox: Sandbox) -> None:
    # A's grandchild is re-parented to the zygote while A still runs; B ending must not touch it.
    code = ("import os, sys, time\n"
            "if os.fork() == 0:\n"
            "    if os.fork() == 0:\n"
            "        time.sleep(1.0)\n"
            "        print('grandchild survived', flush=True)\n"
            "    os._exit(0)\n"
            "time.sleep(1.6)\n")
    holder: list[object] = []
    worker = threading.Thread(target=lambda: holder.append(sandbox.run_python(code)))
    worker.start()
    deadline = time.monotonic() + 1.2
    while time.monotonic() < deadline:
        assert sandbox.run_python("print(1)").ok
    worker.join(10)
    (result,) = holder
    assert "grandchild survived" in result.stdout, result  # type: ignore[attr-defined]


UNPRIVILEGED_SCRIPT = """
import json, os, sys, threading
from openenv_sandbox import Sandbox
os.environ["OPENENV_TOKEN"] = "s3cret-token-value"
stop = threading.Event()
threads = [threading.Thread(target=stop.wait) for _ in range(40)]  # a busy server's session threads
for t in threads:
    t.start()
with Sandbox(slots=2) as box:
    plain = box.run_python("import os; print(os.getuid())")
    stray = box.run_python("import os, time\\nif os.fork() == 0:\\n    time.sleep(30)\\nprint('ok')")
    # The server shares the execution's uid: only its being non-dumpable keeps its environ out of reach.
    environ = box.run_python(f"print(open('/proc/{os.getpid()}/environ', 'rb').read())")
    forks = box.run_command("echo hi | cat")  # RLIMIT_NPROC counts the server's 40 threads too
    print(json.dumps({"me": os.getuid(), "uid": plain.stdout.strip(), "stray": stray.stdout.strip(),
                      "environ": environ.stdout + environ.stderr[-200:], "forks": forks.stdout + forks.stderr,
                      "privileges": box.boundary["privileges"], "network": box.boundary["network"],
                      "server_process": box.boundary["server_process"],
                      "not_enforced": box.boundary["not_enforced"]}))
stop.set()
"""


@root_only
def test_an_unprivileged_server_degrades_says_so_and_survives() -> None:
    """What the docker provider's container looks like without ``sandbox.drop_privileges``: no
    root, so no uid drop and no sweep. The leftover-process cleanup must then never sweep the
    server's own uid; the server is made non-dumpable so that its environment stays unreadable."""
    import subprocess

    import openenv_sandbox

    src = str(Path(openenv_sandbox.__file__).parent.parent)
    out = subprocess.run(["/usr/bin/python3", "-c", UNPRIVILEGED_SCRIPT], user=65534, group=65534,
                         extra_groups=[], env={"PATH": "/usr/bin:/bin", "PYTHONPATH": src},
                         capture_output=True, text=True, timeout=60, cwd="/")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["me"] == 65534 and report["uid"] == "65534" and report["stray"] == "ok"
    assert report["privileges"].startswith("NOT dropped")
    assert "s3cret" not in report["environ"] and "PermissionError" in report["environ"]
    assert report["forks"] == "hi\n"
    assert report["server_process"]["dumpable"] is False
    assert any("can signal (kill) the server" in line for line in report["not_enforced"])


def test_required_network_isolation_is_refused_where_the_platform_refuses_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import openenv_sandbox.runner as runner

    monkeypatch.setattr(runner, "network_namespace_support", lambda: "unshare(CLONE_NEWNET) refused: EPERM")
    with pytest.raises(RuntimeError, match="require_network_isolation=False"):
        Sandbox(require_network_isolation=True)
    with Sandbox(slots=1, uid_base=62400) as box:  # not required: the seccomp filter keeps it offline
        assert box.boundary["network"] == ("none: socket() limited to AF_UNIX by the seccomp filter (no network "
                                           "namespace: unshare(CLONE_NEWNET) refused: EPERM)")
    with Sandbox(slots=1, uid_base=62400, syscall_filter=False) as box:  # neither: it runs, and says so plainly
        assert box.boundary["network"] == "HOST NETWORK: unshare(CLONE_NEWNET) refused: EPERM"
        assert any(line.startswith("NETWORK: the execution shares") for line in box.boundary["not_enforced"])


def test_an_execution_whose_zygote_dies_is_reported_lost() -> None:
    with Sandbox(slots=2, uid_base=62450) as box:
        assert box.run_python("print(1)").ok
        assert box._zygote is not None
        zygote = box._zygote.proc
        timer = threading.Timer(0.5, zygote.kill)
        timer.start()
        # the grandchild has no parent-death signal: the runner's own sweep must take it down
        result = box.run_python("import os, time\nif os.fork() == 0:\n    os.setsid()\ntime.sleep(30)",
                                limits=Limits(wall_time_s=20.0))
        timer.join()
        assert result.killed_by == "sandbox_lost" and result.exit_code is None and result.duration_s < 10
        assert processes_of(box.uids) == []  # PDEATHSIG and the runner's sweep
        assert box.run_python("print(2)").stdout == "2\n"


def test_roots_left_by_a_killed_process_are_removed(tmp_path: Path) -> None:
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True).stdout.strip()
    stale = tmp_path / f"openenv-sandbox-{dead}-abcd"
    (stale / "run-x").mkdir(parents=True)
    alive = tmp_path / "openenv-sandbox-1-efgh"  # pid 1 is always alive
    alive.mkdir()
    with Sandbox(slots=1, uid_base=62480, root=str(tmp_path)) as box:
        assert box.root.name.startswith(f"openenv-sandbox-{os.getpid()}-")
        assert not stale.exists() and alive.is_dir()


def test_a_failed_self_check_is_reported_and_run_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A self-check that fails (a busy host can time it out) says so in the boundary, and is not
    remembered: the next call runs it again, and a success is then kept."""
    box = Sandbox(Limits(cpu_time_s=3, wall_time_s=3.0), pool=False)
    real = box.run_python
    calls: list[str] = []

    def flaky(code: str, **kw: object) -> object:
        calls.append(code)
        if len(calls) == 1:
            raise RuntimeError("the host is busy")
        return real(code, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(box, "run_python", flaky)
    try:
        first = box.boundary
        assert "the boundary self-check could not run: the host is busy" in first["self_check"]["error"]
        assert any(line.startswith("UNVERIFIED") for line in first["not_enforced"])
        second = box.self_check()
        assert "error" not in second and second["can_signal_server"] in (True, False)
        assert box.self_check() is second and len(calls) == 2  # a success is remembered
    finally:
        box.close()
