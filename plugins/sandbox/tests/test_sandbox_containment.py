"""Hostile code is contained. Each test's payload succeeds when run without the sandbox (in this
process or a plain subprocess); the assertions check that, here, it does not."""

from __future__ import annotations

import errno
import os
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from openenv_sandbox import Limits, Sandbox
from openenv_sandbox.host import processes_of

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="dropping privileges needs root")


def slot_processes(sandbox: Sandbox) -> list[tuple[int, int]]:
    """What runs as the sandbox's uids (leased for it alone on this host)."""
    assert sandbox.uids is not None
    return processes_of(sandbox.uids)


def assert_healthy(sandbox: Sandbox) -> None:
    """Another execution still runs normally right after the hostile one."""
    result = sandbox.run_python("print(6 * 7)")
    assert result.exit_code == 0 and result.stdout == "42\n", result
    assert slot_processes(sandbox) == []


def test_infinite_loop_is_killed_at_the_wall_clock_limit(sandbox: Sandbox) -> None:
    start = time.monotonic()
    result = sandbox.run_python("while True:\n    pass\n", limits=Limits(cpu_time_s=30, wall_time_s=1.0))
    assert result.timed_out and result.killed_by == "wall_time" and result.exit_code == -9
    assert time.monotonic() - start < 5
    assert_healthy(sandbox)


def test_cpu_time_limit(sandbox: Sandbox) -> None:
    result = sandbox.run_python("while True:\n    pass\n", limits=Limits(cpu_time_s=1, wall_time_s=8.0))
    assert not result.timed_out and result.killed_by == "cpu_time"
    assert_healthy(sandbox)


def test_fork_bomb_is_capped_and_every_process_is_gone_afterwards(sandbox: Sandbox) -> None:
    code = ("import os, time\n"
            "forked = 0\n"
            "while True:\n"
            "    try:\n"
            "        os.fork(); forked += 1\n"
            "    except OSError:\n"
            "        time.sleep(0.01)\n")
    result = sandbox.run_python(code, limits=Limits(wall_time_s=2.0, processes=16))
    assert result.timed_out and result.killed_by == "wall_time"
    assert_healthy(sandbox)


def test_processes_that_escape_the_process_group_die_with_the_execution(sandbox: Sandbox) -> None:
    code = ("import os, time\n"
            "if os.fork() == 0:\n"
            "    os.setsid()\n"
            "    if os.fork() == 0:\n"
            "        time.sleep(600)\n"
            "    os._exit(0)\n"
            "time.sleep(0.2)\n"
            "print('parent done')\n")
    result = sandbox.run_python(code)
    assert result.exit_code == 0 and result.stdout == "parent done\n"
    assert slot_processes(sandbox) == []  # the double-forked, setsid'd sleeper is gone too


def test_allocating_8_gib_fails(sandbox: Sandbox) -> None:
    result = sandbox.run_python("x = bytearray(8 << 30)\nprint('allocated')\n")
    assert result.exit_code != 0 and "allocated" not in result.stdout
    assert "MemoryError" in result.stderr
    assert_healthy(sandbox)


def test_writing_a_10_gib_file_is_stopped_at_the_file_size_limit(sandbox: Sandbox) -> None:
    code = ("chunk = b'x' * (1 << 20)\n"
            "with open('big.bin', 'wb') as f:\n"
            "    for _ in range(10 * 1024):\n"
            "        f.write(chunk)\n"
            "print('wrote 10 GiB')\n")
    result = sandbox.run_python(code, limits=Limits(file_size_bytes=8 << 20, wall_time_s=10.0))
    assert result.killed_by == "file_size" and "wrote" not in result.stdout
    assert_healthy(sandbox)


def test_printing_1_gb_is_cut_at_the_output_cap(sandbox: Sandbox) -> None:
    code = "import sys\nchunk = 'x' * (1 << 20)\nfor _ in range(1024):\n    sys.stdout.write(chunk)\n"
    result = sandbox.run_python(code, limits=Limits(output_bytes=4096, wall_time_s=10.0))
    assert result.stdout_truncated and result.killed_by == "output_limit"
    assert result.stdout.startswith("x" * 4096) and "output truncated at 4096 bytes" in result.stdout
    assert len(result.stdout) < 4096 + 100
    assert_healthy(sandbox)


def test_opening_files_stops_at_the_open_file_limit(sandbox: Sandbox) -> None:
    code = ("import os\nfds = []\ntry:\n    while len(fds) < 4096:\n"
            "        fds.append(os.open('/dev/null', os.O_RDONLY))\n"
            "except OSError as exc:\n    print(len(fds), exc.errno, max(fds))\n")
    result = sandbox.run_python(code, limits=Limits(open_files=40, cpu_time_s=3, wall_time_s=3.0))
    opened, error, highest = map(int, result.stdout.split())  # no output: 4096 opened, nothing stopped it
    assert error == errno.EMFILE and highest == 39  # descriptors 0..39, whatever was already open
    assert 30 <= opened < 40 and result.exit_code == 0
    assert result.limits["open_files"] == 40
    assert_healthy(sandbox)


def test_the_servers_environment_and_token_are_out_of_reach(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENENV_TOKEN", "s3cret-token-value")
    code = ("import os\n"
            "print(sorted(os.environ))\n"
            f"for pid in (os.getppid(), {os.getpid()}, 1):\n"
            "    try:\n"
            "        print(open(f'/proc/{pid}/environ', 'rb').read())\n"
            "    except OSError as exc:\n"
            "        print('denied', pid, type(exc).__name__)\n")
    result = sandbox.run_python(code)
    assert result.exit_code == 0
    assert "s3cret-token-value" not in result.stdout and "OPENENV_TOKEN" not in result.stdout
    assert result.stdout.count("denied") == 3, result.stdout
    first_line = result.stdout.splitlines()[0]
    assert first_line == str(sorted(["HOME", "LANG", "PATH", "PYTHONDONTWRITEBYTECODE", "PYTHONIOENCODING", "TMPDIR"]))


def test_no_socket_reaches_the_servers_loopback_port(sandbox: Sandbox) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    try:
        code = ("import socket\n"
                f"s = socket.create_connection(('127.0.0.1', {port}), timeout=2)\n"
                "print('connected')\n")
        result = sandbox.run_python(code)
        assert "connected" not in result.stdout and result.exit_code != 0
        assert "Network is unreachable" in result.stderr or "Errno" in result.stderr
        assert result.boundary["network"].startswith("none")
        listener.settimeout(0.2)
        with pytest.raises(TimeoutError):
            listener.accept()
    finally:
        listener.close()


def test_killing_the_parent_or_the_server_is_refused(sandbox: Sandbox) -> None:
    code = ("import os, signal\n"
            f"for pid in (os.getppid(), {os.getpid()}):\n"
            "    try:\n"
            "        os.kill(pid, signal.SIGKILL)\n"
            "        print('killed', pid)\n"
            "    except PermissionError:\n"
            "        print('refused', pid)\n")
    result = sandbox.run_python(code)
    assert result.stdout.count("refused") == 2, result
    assert_healthy(sandbox)


def test_files_outside_the_working_directory_cannot_be_deleted(
        sandbox: Sandbox, tmp_path_factory: pytest.TempPathFactory) -> None:
    outside = Path(tmp_path_factory.mktemp("outside"))
    outside.chmod(0o755)
    Path(outside.parent).chmod(0o755)
    victim = outside / "precious.txt"
    victim.write_text("keep me")
    victim.chmod(0o644)
    code = ("import os, shutil\n"
            f"for action in (lambda: os.remove({str(victim)!r}), lambda: shutil.rmtree({str(outside)!r}),\n"
            "               lambda: os.rmdir(os.path.dirname(os.getcwd())), lambda: os.remove('/etc/hostname')):\n"
            "    try:\n"
            "        action(); print('deleted')\n"
            "    except OSError as exc:\n"
            "        print('refused', type(exc).__name__)\n")
    result = sandbox.run_python(code)
    assert "deleted" not in result.stdout and result.stdout.count("refused") == 4, result
    assert victim.read_text() == "keep me" and sandbox.root.is_dir()


def test_64_concurrent_executions_each_get_their_own_uid(sandbox: Sandbox) -> None:
    code = "import os, time\ntime.sleep(0.5)\nprint(os.getuid())\n"
    with ThreadPoolExecutor(64) as pool:
        results = list(pool.map(lambda _: sandbox.run_python(code, limits=Limits(wall_time_s=30.0)), range(64)))
    assert all(r.exit_code == 0 for r in results), [r for r in results if r.exit_code != 0][:1]
    uids = {int(r.stdout) for r in results}
    assert uids == set(sandbox.uids or ())
    assert_healthy(sandbox)
