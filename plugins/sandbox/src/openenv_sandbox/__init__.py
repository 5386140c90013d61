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
import threading

from openenv_sandbox.grading import Verdict, grade_copy
from openenv_sandbox.limits import TRUNCATION_MARKER, ExecResult, Limits
from openenv_sandbox.runner import DEFAULT_UID_BASE, GRADER_UID_OFFSET, Sandbox

__all__ = ["DEFAULT_UID_BASE", "GRADER_UID_OFFSET", "TRUNCATION_MARKER", "ExecResult", "Limits", "Sandbox", "Verdict",
           "default_sandbox", "grade_copy"]

_shared: Sandbox | None = None
_shared_lock = threading.Lock()


def default_sandbox() -> Sandbox:
    """The shared sandbox of this process (one zygote, 64 slots), created on first use."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = Sandbox()
            atexit.register(_shared.close)
        return _shared
