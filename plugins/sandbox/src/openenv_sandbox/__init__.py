"""The sandbox every OpenEnv environment that runs untrusted code uses.

``Sandbox().run_python("print(1)")`` runs the code outside the server process: forked from a warm
zygote, as an unprivileged uid, in a new network namespace, under resource limits, in a fresh
directory. ``default_sandbox()`` is the process-wide shared instance (closed at exit).
``grade_copy(sandbox, check, tree=...)`` grades a copy of an agent's tree in a fresh execution as
another uid (``openenv_sandbox.grading``). See the
package README for exactly what it does and does not protect against.
"""

from __future__ import annotations

import atexit
import os
import threading

from openenv_sandbox.grading import Verdict, grade_copy
from openenv_sandbox.limits import TRUNCATION_MARKER, ExecResult, Limits
from openenv_sandbox.runner import DEFAULT_UID_BASE, GRADER_UID_OFFSET, Sandbox

__all__ = ["DEFAULT_UID_BASE", "GRADER_UID_OFFSET", "TRUNCATION_MARKER", "ExecResult", "Limits", "Sandbox", "Verdict",
           "default_sandbox", "grade_copy"]

_shared: Sandbox | None = None
_shared_lock = threading.Lock()


def default_sandbox() -> Sandbox:
    """The shared sandbox of this process (one zygote, 64 slots), created on first use. Its uids
    are the first free block from ``OPENENV_SANDBOX_UID_BASE`` (default ``DEFAULT_UID_BASE``, 61000)
    on this host (``openenv_sandbox.uids``)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            base = os.environ.get("OPENENV_SANDBOX_UID_BASE", "").strip()
            try:
                uid_base = int(base) if base else DEFAULT_UID_BASE
            except ValueError:
                raise ValueError(f"OPENENV_SANDBOX_UID_BASE must be a uid number, got {base!r}") from None
            _shared = Sandbox(uid_base=uid_base)
            atexit.register(_shared.close)
        return _shared
