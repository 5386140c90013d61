"""Child processes that tests signal: start them with the default signal dispositions.

A POSIX shell starts a background job (``cmd &``, no job control) with SIGINT and SIGQUIT set to
"ignore", and an ignored disposition survives ``exec``: a server started from such a job never sees
the Ctrl-C a test sends it (Python installs its ``KeyboardInterrupt`` handler only where SIGINT is at
its default), so the test sees exit 0 where it expects 130: a failure that has nothing to do with
the code under test. Start such children with
``preexec_fn=restore_default_signals``::

    from openenv.testing import restore_default_signals

    proc = subprocess.Popen([...], start_new_session=True, preexec_fn=restore_default_signals)
    proc.send_signal(signal.SIGINT)   # a real Ctrl-C, however the test run itself was launched
"""

from __future__ import annotations

import signal

__all__ = ["BACKGROUND_IGNORED", "restore_default_signals"]

#: What a POSIX shell ignores in the jobs it starts in the background.
BACKGROUND_IGNORED: tuple[signal.Signals, ...] = (signal.SIGINT, signal.SIGQUIT)


def restore_default_signals() -> None:
    """A ``preexec_fn``: put SIGINT and SIGQUIT back to their default action in the child (it runs
    after ``fork`` and before ``exec``; handlers the parent installed are reset by ``exec`` anyway,
    so only an inherited "ignore" changes)."""
    for sig in BACKGROUND_IGNORED:
        signal.signal(sig, signal.SIG_DFL)
