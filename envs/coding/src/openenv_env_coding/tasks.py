"""Coding tasks (JSONL), grading in the sandbox, and ``pass_rate``.

A task line: ``{"id", "split", "prompt", "starter", "examples": [test, ...], "tests": [test, ...]}`` where a
test is Python source that raises (usually ``assert``) when the solution is wrong. ``examples`` are
visible to the agent (``run_tests``); ``tests`` are hidden and decide the reward on submit.
A test is replayed outside the solution's process (``replay``): it may call the solution's functions
by name with plain-data arguments and compare their plain-data results. A test that uses a solution
name other than as a call, imports a module outside ``replay.MODULES`` or uses a builtin outside
``replay.SAFE_BUILTINS`` is refused when its task is loaded; a call whose result is not plain data
(an instance of the solution's class...) fails that test. ``split`` (``train``/``test``) is read by
the kernel's task API (``openenv.tasks.TaskFile``); a file without it is still a valid task list for
``tasks_file=``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any

from openenv_env_coding.replay import harness, judge, solution_names
from openenv_sandbox import Limits, Sandbox, grade_copy
from openenv_sandbox.grading import last_error_line

__all__ = ["BUILTIN_TASKS", "Task", "TaskError", "TestOutcome", "grade", "load_tasks", "pass_rate"]

BUILTIN_TASKS = "tasks.jsonl"
#: The file the solution is written to in each test's fresh grading folder.
SOLUTION_FILE = "solution.py"
#: Limits of one hidden test (the solution runs again for each test, in a fresh process); the
#: output cap also bounds the recorded results (``replay.MAX_PAYLOAD``) on the verdict pipe.
TEST_LIMITS = Limits(cpu_time_s=2, wall_time_s=4.0, memory_bytes=256 * 1024 * 1024, processes=16,
                     output_bytes=64 * 1024)


class TaskError(ValueError):
    """A task file or task line is malformed."""


@dataclass(frozen=True)
class Task:
    id: str
    prompt: str
    tests: tuple[str, ...]
    examples: tuple[str, ...] = ()
    starter: str = ""

    @classmethod
    def from_dict(cls, data: Any, where: str = "task") -> Task:
        if not isinstance(data, dict):
            raise TaskError(f"{where}: expected a JSON object, got {type(data).__name__}")
        missing = [k for k in ("id", "prompt", "tests") if k not in data]
        if missing:
            raise TaskError(f"{where}: missing field(s) {missing}; a task needs id, prompt and tests "
                            "(examples and starter are optional)")
        unknown = sorted(set(data) - {"id", "split", "prompt", "tests", "examples", "starter"})
        if unknown:
            raise TaskError(f"{where}: unknown field(s) {unknown}; allowed: id, split, prompt, tests, examples, "
                            "starter")
        for key in ("tests", "examples"):
            value = data.get(key, [])
            if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
                raise TaskError(f"{where}: {key} must be a list of Python source strings")
        if not data["tests"]:
            raise TaskError(f"{where}: tests is empty; a task needs at least one hidden test")
        for key in ("tests", "examples"):
            for number, test in enumerate(data.get(key, []), 1):
                try:
                    solution_names(test)
                except ValueError as exc:
                    raise TaskError(f"{where}: task {data['id']!r}, {key[:-1]} {number}: {exc}") from None
        return cls(id=str(data["id"]), prompt=str(data["prompt"]), tests=tuple(data["tests"]),
                   examples=tuple(data.get("examples", [])), starter=str(data.get("starter", "")))


def load_tasks(path: str | Path | None = None) -> list[Task]:
    """Tasks from a JSONL file (``None``: the built-in set shipped with the package)."""
    if path is None:
        text = files("openenv_env_coding").joinpath(BUILTIN_TASKS).read_text(encoding="utf-8")
        where = BUILTIN_TASKS
    else:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise TaskError(f"cannot read tasks file {path!s}: {exc.strerror}") from None
        where = str(path)
    tasks: list[Task] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise TaskError(f"{where}:{number}: not JSON ({exc.msg})") from None
        tasks.append(Task.from_dict(data, f"{where}:{number}"))
    if not tasks:
        raise TaskError(f"{where}: no tasks")
    ids = [t.id for t in tasks]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise TaskError(f"{where}: duplicate task id(s) {dupes}")
    return tasks


@dataclass
class TestOutcome:
    __test__ = False  # not a pytest class

    test: str
    passed: bool
    detail: str = ""
    result: dict[str, Any] = field(default_factory=dict)


def pass_rate(outcomes: Sequence[TestOutcome] | Sequence[bool]) -> float:
    """Fraction of tests passed, in [0, 1] (0.0 for no tests). The reward of a submission."""
    if not outcomes:
        return 0.0
    passed = sum(1 for o in outcomes if (o.passed if isinstance(o, TestOutcome) else bool(o)))
    return passed / len(outcomes)


def grade(sandbox: Sandbox, solution: str, tests: Sequence[str], limits: Limits = TEST_LIMITS) -> list[TestOutcome]:
    """Run each test against ``solution``, each in its own grading execution
    (``openenv_sandbox.grade_copy``: a fresh folder holding only ``solution.py``, the grader uid, a
    private ``/tmp``, the verdict read fail-closed) that records what the solution's functions
    returned as plain data; the test passes when its own code, replayed here on those records
    (``replay.judge``), passes. The solution never decides a verdict from inside its process."""
    outcomes = []
    for test in tests:
        try:
            names = solution_names(test)
        except ValueError as exc:  # a task that was not loaded through Task (checked there)
            outcomes.append(TestOutcome(test=test, passed=False, detail=f"the test cannot be graded: {exc}"))
            continue
        verdict = grade_copy(sandbox, harness(test, names, SOLUTION_FILE), files={SOLUTION_FILE: solution},
                             limits=limits, payload=True)
        result = verdict.result
        detail = verdict.error
        if result is not None and not verdict.passed and result.exit_code and not result.killed_by:
            detail = last_error_line(result) or detail  # what the solution raised, as the env always said
        if verdict.passed:
            detail = judge(test, names, verdict.payload)
        outcomes.append(TestOutcome(test=test, passed=verdict.passed and not detail, detail=detail,
                                    result={"exit_code": None if result is None else result.exit_code,
                                            "killed_by": None if result is None else result.killed_by,
                                            "timed_out": bool(result and result.timed_out),
                                            "grader_uid": verdict.grader_uid}))
    return outcomes
