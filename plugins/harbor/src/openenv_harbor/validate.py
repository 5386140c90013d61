"""Validate a Harbor task suite: every task's oracle must score 1 and a no-op agent 0.

``validate_suite(path, jobs=2)`` sets each task up in bubblewrap boxes (``jobs`` tasks at once),
runs ``solution/solve.sh`` and grades it in a fresh box, grades an untouched workspace, and returns
one :class:`TaskCheck` per task folder (a folder that does not load fails, naming its file).
``openenv validate harbor:PATH`` prints them as a table (``--json`` too) and exits 1 if any fails.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from openenv_harbor import docker as docker_rt
from openenv_harbor.box import Grade, run_noop, run_oracle
from openenv_harbor.task import HarborTask, HarborTaskError, load_suite

if TYPE_CHECKING:
    from openenv.cli.validate_cmd import Report

__all__ = ["DEFAULT_JOBS", "TaskCheck", "check_task", "report_of", "validate_suite"]

#: Tasks validated at once: each runs boxes one after another, so this bounds the boxes alive.
DEFAULT_JOBS = max(1, min(4, (os.cpu_count() or 2) // 2))


@dataclass
class TaskCheck:
    """One task's oracle and no-op rewards, and what failed (empty: the task is sound)."""

    task: str
    oracle: float | None = None
    noop: float | None = None
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.errors


def check_task(task: HarborTask, scratch: Path | None = None) -> TaskCheck:
    """The oracle (must reach 1) and the no-op agent (must score 0) of one task; never raises for a bad task."""
    result = TaskCheck(task.id)
    start = time.monotonic()
    try:
        docker = bool(task.local_blocker) and docker_rt.available()  # else the blocker is the error
        graded, solved = docker_rt.run_oracle(task, scratch) if docker else run_oracle(task, scratch)
        result.oracle = graded.reward
        if solved.status != 0:
            result.errors.append(f"oracle: {task.path / 'solution' / 'solve.sh'} exited {solved.status}"
                                 + (f" ([agent] timeout_sec={task.agent_timeout_s:g} hit)" if solved.timed_out else ""))
        if graded.error:
            result.errors.append(f"oracle: {graded.error}")
        elif graded.reward != 1.0:
            result.errors.append(f"oracle: reward {graded.reward:g}, expected 1 (fix solution/solve.sh or tests/)")
        noop = _docker_noop(task, scratch) if docker else run_noop(task, scratch)
        result.noop = noop.reward
        if noop.reward != 0.0:
            result.errors.append(f"no-op: reward {noop.reward:g}, expected 0 (the verifier passes an untouched "
                                 "workspace: make tests/ check the task's outcome)")
    except HarborTaskError as exc:
        result.errors.append(str(exc))
    result.seconds = time.monotonic() - start
    return result


def _docker_noop(task: HarborTask, scratch: Path | None) -> Grade:
    container = docker_rt.start(task)
    try:
        return docker_rt.grade(container, scratch)
    finally:
        docker_rt.close(container)


def validate_suite(path: str | Path, jobs: int = DEFAULT_JOBS, scratch: Path | None = None) -> list[TaskCheck]:
    """check_task for every task of the suite, ``jobs`` at a time; broken task folders fail with their error."""
    suite = load_suite(path)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        checks = list(pool.map(lambda t: check_task(t, scratch), suite.tasks))
    checks += [TaskCheck(name, errors=[str(exc)]) for name, exc in suite.errors.items()]
    return sorted(checks, key=lambda c: c.task)


def report_of(arg: str, checks: list[TaskCheck]) -> Report:
    """The kernel's validate report: one row per task."""
    from openenv.cli.validate_cmd import Check, Report

    report = Report(target=f"harbor:{arg}")
    for c in checks:
        rewards = f"oracle={c.oracle if c.oracle is not None else '-'} noop={c.noop if c.noop is not None else '-'}"
        report.checks.append(Check(c.task, "pass" if c.ok else "fail", f"{rewards} ({c.seconds:.1f}s)"
                                   + ("; " + "; ".join(c.errors) if c.errors else ""),
                                   "" if c.ok else "see the error: fix the named file"))
    return report
