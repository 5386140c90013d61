"""Child processes in tests: start them with the default signal dispositions, and find the ones
left behind.

A POSIX shell starts a background job (``cmd &``, no job control) with SIGINT and SIGQUIT set to
"ignore", and an ignored disposition survives ``exec``: a server started from such a job never sees
the Ctrl-C a test sends it (Python installs its ``KeyboardInterrupt`` handler only where SIGINT is at
its default), so the test sees exit 0 where it expects 130: a failure that has nothing to do with
the code under test. Start such children with
``preexec_fn=restore_default_signals``::

    from openenv.testing import restore_default_signals

    proc = subprocess.Popen([...], start_new_session=True, preexec_fn=restore_default_signals)
    proc.send_signal(signal.SIGINT)   # a real Ctrl-C, however the test run itself was launched

``processes_matching(marker)`` lists the processes of this machine whose command line contains
``marker`` (Linux ``/proc``): a red-team test starts its planted process as ``exec -a MARKER ...``
and asserts afterwards that none is left.
"""

from __future__ import annotations

import signal
from pathlib import Path

__all__ = ["BACKGROUND_IGNORED", "processes_matching", "restore_default_signals"]

#: What a POSIX shell ignores in the jobs it starts in the background.
BACKGROUND_IGNORED: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGQUIT)


def restore_default_signals() -> None:
    """A ``preexec_fn``: put SIGINT and SIGQUIT back to their default action in the child (it runs
    after ``fork`` and before ``exec``; handlers the parent installed are reset by ``exec`` anyway,
    so only an inherited "ignore" changes)."""
    for sig in BACKGROUND_IGNORED:
        signal.signal(sig, signal.SIG_DFL)


def processes_matching(marker: str) -> list[int]:
    """The pids whose command line contains ``marker`` (read from ``/proc``; processes that end
    while it is read, or that this user may not read, are skipped). Empty where there is no
    ``/proc``. A process that was started a moment ago can show an empty command line until its
    program has loaded: to find one you just started, poll."""
    found: list[int] = []
    needle = marker.encode()
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            if needle in (proc / "cmdline").read_bytes():
                found.append(int(proc.name))
        except OSError:
            continue
    return sorted(found)
