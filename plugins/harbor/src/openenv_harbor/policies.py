"""Scripted policies for ``openenv eval harbor:PATH --policy openenv_harbor.policies:oracle`` (or ``:noop``).

* ``oracle`` plays the task's own ``solution/``: it reads the folder named by the observation's
  ``task_dir`` (the policy must run on the server's machine, as with the local provider), sends one
  command that unpacks it to ``/solution`` and runs ``bash /solution/solve.sh``, submitting with it.
  A suite whose oracle does not score 1.0 has a broken task.
* ``noop`` submits at once: a task a no-op agent passes has a broken verifier.
"""

from __future__ import annotations

import base64
import io
import tarfile
from pathlib import Path
from typing import Any

__all__ = ["noop", "oracle", "oracle_command"]


def _field(observation: Any, name: str) -> Any:
    if isinstance(observation, dict):
        return observation.get(name)
    return getattr(observation, name, None)


def oracle_command(task_dir: str | Path) -> str:
    """A shell command that recreates the task's ``solution/`` at /solution and runs solve.sh."""
    solution = Path(task_dir) / "solution"
    if not (solution / "solve.sh").is_file():
        raise FileNotFoundError(f"{solution / 'solve.sh'}: missing; the oracle policy reads the task folder on "
                                "this machine (serve the suite locally)")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        tar.add(solution, arcname=".")
    packed = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f"echo {packed} | base64 -d | tar -xzf - -C /solution && bash /solution/solve.sh"


def oracle(observation: Any, ctx: Any = None) -> dict[str, Any]:
    """One step: run the task's solution, then submit."""
    return {"command": oracle_command(str(_field(observation, "task_dir"))), "submit": True}


def noop(observation: Any, ctx: Any = None) -> dict[str, Any]:
    """Submit the untouched workspace."""
    return {"submit": True}
