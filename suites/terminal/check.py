"""Oracle / no-op check of a Harbor task suite in bubblewrap boxes (python3 stdlib only).

For every task folder it materialises ``/app`` from ``environment/Dockerfile`` the way the local
runtime does (COPY from the build context, then each RUN inside the box, WORKDIR and ENV honoured),
then, each in a fresh box with no network:

* the oracle: ``solution/`` copied to ``/solution``, ``bash /solution/solve.sh`` run in ``/app``,
  then the task's original ``tests/`` copied to ``/tests`` and ``bash /tests/test.sh`` run;
  the reward must be 1;
* the no-op agent: a fresh copy of the set-up ``/app``, the tests run straight away; the reward must be 0;
* the hollow agent: the oracle's workspace with every file the oracle created or changed emptied
  (the shortcut of writing empty outputs at the right paths); the reward must be 0.

Usage::

    python3 suites/terminal/check.py                 # every task, 2 at a time
    python3 suites/terminal/check.py csv-sales-summary git-remove-secret -j 1 -v

Exit status 0 when every task passes both checks, 1 otherwise (each failure names the task, the
phase and why). Only Dockerfiles of *local tasks* are accepted: FROM, WORKDIR, COPY, ENV, LABEL, RUN.

The boxes, the set-up, the separate-box grading and the fail-closed reward are the local runtime of
``openenv_harbor`` (plugins/harbor), imported from the installed package or, with a bare python3,
from this checkout's plugins/harbor/src; this script adds only the hollow agent and the report.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

try:
    import openenv_harbor  # noqa: F401  (installed: uv sync --all-packages)
except ImportError:  # a bare python3 in a checkout: the plugin's stdlib-only modules from its source
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "plugins" / "harbor" / "src"))

from openenv_harbor.box import BoxDirs, Grade, Workspace, grade, prepare, run_oracle, snapshot
from openenv_harbor.task import HarborTask as Task
from openenv_harbor.task import HarborTaskError as TaskError
from openenv_harbor.task import find_tasks, load_task, parse_dockerfile

__all__ = ["BoxDirs", "Outcome", "Task", "TaskError", "check_suite", "check_task", "find_tasks", "load_task",
           "main", "parse_dockerfile"]

SUITE = Path(__file__).resolve().parent


@dataclass
class Outcome:
    """What the check found for one task; ``ok`` when the oracle scored 1, the no-op and hollow agents 0."""

    task: str
    oracle_reward: float | None = None
    noop_reward: float | None = None
    hollow_reward: float | None = None
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    log: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (not self.errors and self.oracle_reward == 1.0 and self.noop_reward == 0.0
                and self.hollow_reward == 0.0)


def _verify(ws: Workspace, outcome: Outcome, label: str, scratch: Path | None, uid: int | None,
            graded: Grade | None = None) -> float | None:
    """The reward of a separate-box grading of ws (None, with the error recorded, when it failed closed)."""
    result = graded or grade(ws, scratch, uid)
    outcome.log.append(f"[{label} verifier, exit {result.exit_code}]\n{result.output}")
    if result.error:
        outcome.errors.append(f"{label}: {result.error.split(': reward 0 (fail closed): ', 1)[-1]}")
        return None
    return result.reward


def _empty_changed_files(before: Path, after: Path) -> None:
    """Truncate every regular file of ``after`` that is new or differs from ``before``."""
    for path in after.rglob("*"):
        if path.is_symlink() or not path.is_file():
            continue
        old = before / path.relative_to(after)
        if not old.is_file() or old.is_symlink() or old.read_bytes() != path.read_bytes():
            path.write_bytes(b"")


def check_task(path: Path, scratch: Path | None = None, grader_uid: int | None = None) -> Outcome:
    """Run the oracle, the no-op and the hollow agent of one task; never raises for a broken task.

    With ``grader_uid`` (needs root and setpriv) the verifiers run as that user, as a runtime that
    grades as another user than the agent's does; ``scratch`` must then be a folder that user can
    enter (the default, the system's temporary folder, is)."""
    outcome = Outcome(task=path.name)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"tsuite-{path.name}-", dir=scratch) as tmp:
        try:
            task = load_task(path)
            built = prepare(task, Path(tmp) / "built")
            oracle = snapshot(built, Path(tmp) / "oracle")
            graded, solved = run_oracle(task, scratch, grader_uid, workspace=oracle)
            outcome.log.append(f"[oracle solve.sh, exit {solved.status}]\n{solved.output}")
            if solved.status != 0:
                outcome.errors.append(f"oracle: solution/solve.sh exited {solved.status}"
                                      + (" ([agent] timeout_sec hit)" if solved.timed_out else ""))
            hollow = snapshot(oracle, Path(tmp) / "hollow")
            _empty_changed_files(built.dirs.app, hollow.dirs.app)
            outcome.oracle_reward = _verify(oracle, outcome, "oracle", scratch, grader_uid, graded)
            outcome.noop_reward = _verify(built, outcome, "no-op", scratch, grader_uid)
            outcome.hollow_reward = _verify(hollow, outcome, "hollow", scratch, grader_uid)
        except TaskError as exc:
            outcome.errors.append(str(exc))
    if outcome.oracle_reward is not None and outcome.oracle_reward != 1.0:
        outcome.errors.append(f"oracle: reward {outcome.oracle_reward:g}, expected 1")
    if outcome.noop_reward is not None and outcome.noop_reward != 0.0:
        outcome.errors.append(f"no-op: reward {outcome.noop_reward:g}, expected 0")
    if outcome.hollow_reward is not None and outcome.hollow_reward != 0.0:
        outcome.errors.append(f"hollow: reward {outcome.hollow_reward:g} with the oracle's outputs emptied, "
                              "expected 0 (the verifier must check content, not only that files exist)")
    outcome.seconds = time.monotonic() - start
    return outcome


def check_suite(paths: Sequence[Path], jobs: int = 2, scratch: Path | None = None,
                grader_uid: int | None = None) -> list[Outcome]:
    """check_task for every folder, ``jobs`` at a time, in the order given."""
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return list(pool.map(lambda p: check_task(p, scratch, grader_uid), paths))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tasks", nargs="*", help="task ids (default: every task of the suite)")
    parser.add_argument("--suite", type=Path, default=SUITE, help="suite folder (default: this file's)")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="tasks checked at once (default 2)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print the boxes' output of failed tasks")
    parser.add_argument("--json", action="store_true", help="print one JSON object per task")
    parser.add_argument("--grader-uid", type=int, metavar="UID",
                        help="run the verifiers as this user, not as the agent's (needs root and setpriv)")
    args = parser.parse_args(argv)
    if shutil.which("bwrap") is None:
        print("check.py needs bubblewrap (apt-get install bubblewrap)", file=sys.stderr)
        return 2
    try:
        paths = find_tasks(args.suite, args.tasks)
    except TaskError as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.grader_uid is not None and (os.geteuid() != 0 or shutil.which("setpriv") is None):
        print("--grader-uid needs root and setpriv (util-linux)", file=sys.stderr)
        return 2
    outcomes = check_suite(paths, args.jobs, grader_uid=args.grader_uid)
    for o in outcomes:
        if args.json:
            print(json.dumps({"task": o.task, "ok": o.ok, "oracle": o.oracle_reward, "noop": o.noop_reward,
                              "hollow": o.hollow_reward, "errors": o.errors, "seconds": round(o.seconds, 2)}))
            continue
        print(f"{'ok  ' if o.ok else 'FAIL'} {o.task:32} oracle={o.oracle_reward} noop={o.noop_reward} "
              f"hollow={o.hollow_reward} {o.seconds:5.1f}s")
        for error in o.errors:
            print(f"     {error}")
        if args.verbose and not o.ok:
            print("\n".join(o.log))
    failed = [o.task for o in outcomes if not o.ok]
    print(f"{len(outcomes) - len(failed)}/{len(outcomes)} tasks pass"
          + (f"; failing: {', '.join(failed)}" if failed else ""), file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
