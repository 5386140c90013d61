"""``openenv.testing.restore_default_signals``: a child started from a run whose SIGINT is ignored
(a background job) still gets Ctrl-C as KeyboardInterrupt."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

# A parent that ignores SIGINT, as a shell's background job does, starts a child Python that reports
# whether SIGINT reaches it as KeyboardInterrupt; argv[1] says whether to use the helper.
PARENT = """
import signal, subprocess, sys
from openenv.testing import restore_default_signals
signal.signal(signal.SIGINT, signal.SIG_IGN)
probe = "import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
extra = {"preexec_fn": restore_default_signals} if sys.argv[1] == "restore" else {}
out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, **extra)
print(out.stdout.strip())
"""


@pytest.mark.parametrize(("mode", "expected"), [("restore", "True"), ("inherit", "False")])
def test_a_child_gets_ctrl_c_back_only_with_the_helper(mode: str, expected: str) -> None:
    out = subprocess.run([sys.executable, "-c", PARENT, mode], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == expected


def test_processes_matching_finds_a_process_by_its_command_line_and_not_after_it_ended() -> None:
    import uuid

    from openenv.testing import processes_matching

    marker = f"oe-marker-{uuid.uuid4().hex}"
    # the marker is in the child's command line only (an argument the script ignores)
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", marker])
    try:
        # Popen can return before the new program's command line is readable (/proc shows it
        # empty for a moment on some kernels), so wait for it, bounded.
        deadline = time.monotonic() + 10
        while not (found := processes_matching(marker)) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert found == [proc.pid]
    finally:
        proc.kill()
        proc.wait(timeout=10)
    assert processes_matching(marker) == []
