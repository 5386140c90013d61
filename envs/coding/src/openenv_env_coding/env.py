"""The Python coding environment.

An episode is one task: the agent writes code, runs it, runs the visible examples, fixes it, and
submits. Promises:

* Agent code never runs in the server process: every run and every hidden test is an execution of
  ``openenv_sandbox`` (a fresh forked process, unprivileged uid, no network, limits). Each test
  (hidden, and the visible examples of ``run_tests``) is graded in a separate box
  (``openenv_sandbox.grade_copy``): a fresh folder holding only the submitted ``solution.py``, the
  test from the env's task data, the slot's grader uid (no agent run uses it), a private ``/tmp``,
  the verdict read fail-closed from a pipe of the grading process; a graded observation's
  ``metadata["grade"]`` lists each failed test's reason (``errors``) and the ``grader_uid``.
* The solution never decides a test's verdict: the grading process only records, as plain data,
  what the solution's functions returned (or raised) for the test's calls; the test's own code is
  then replayed in the server on those records (``replay``), so an object equal to everything, a
  patched ``exec``/``AssertionError``, a trace or audit hook or a forged verdict earns nothing. A
  result that is not plain data (an instance of the solution's class, a subclass of ``int``...)
  fails its test with a reason naming it.
* Plain action ``{"code": ..., "submit": false}`` runs the code; ``"submit": true`` grades it.
  MCP tools: ``run_code(code)``, ``run_tests(code)`` (visible examples), ``submit(code)``.
* Reward: 0 for every step but the submission, whose reward is ``pass_rate`` of the hidden tests;
  submitting ends the episode. When the step budget runs out the last code is graded the same way.
  The served reward is the env's declared rubric, ``code_tests`` from ``openenv_rubrics``
  (``CodeTestPassRate``, component ``pass_rate``), which reads the grade the env puts in the
  observation's ``metadata["tests"]`` (``{"passed", "total"}``, on every observation that graded
  code: a plain submit, the ``submit`` tool, the exhausted budget) and scores 0.0 on a step that
  graded nothing. ``openenv serve coding --rubric code_tests=...`` replaces it; the env computes
  the same reward itself, for callers that apply no rubric.
* ``reset(task_id=..., seed=...)`` picks the task (by id, else by seed, else at random); the task
  set is the built-in one or ``tasks_file=`` (constructor or reset keyword).
* The built-in tasks are declared to the task API (``openenv.yaml``'s ``tasks: {file: tasks.jsonl}``:
  10 ``train``, 4 ``test``); the server's ``reset(task_id=...)`` arrives as
  ``reset(task=<openenv.tasks.Task>)``, whose data (prompt, starter, examples, tests) is the task played.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import asdict
from typing import Any, ClassVar

from pydantic import Field

from openenv.errors import ValidationError, did_you_mean
from openenv.tasks import Task as DeclaredTask
from openenv.tasks import checked_task
from openenv.tools import ToolCallError, ToolEnvironment, ToolSpec, tool
from openenv.tools.wire import CallToolAction, CallToolObservation, ListToolsObservation
from openenv.types import Action, EnvironmentMetadata, Observation, State
from openenv_env_coding.tasks import Task, TaskError, TestOutcome, grade, load_tasks, pass_rate
from openenv_rubrics.builtin import CodeTestPassRate
from openenv_sandbox import ExecResult, Limits, Sandbox, default_sandbox

__all__ = ["TESTS_FIELD", "CodeAction", "CodingEnv", "CodingObservation", "CodingState", "SandboxedMetadata"]

DEFAULT_MAX_STEPS = 10
RUN_LIMITS = Limits(cpu_time_s=5, wall_time_s=10.0, output_bytes=32 * 1024)
#: Where a graded step's ``{"passed", "total"}`` goes (what the ``code_tests`` rubric reads).
TESTS_FIELD = "observation.metadata.tests"


class CodeAction(Action):
    """Run Python code, or submit it for grading."""

    code: str = Field(description="Python source: the whole solution (it is run as a fresh program)")
    submit: bool = Field(default=False, description="Grade this code against the hidden tests and end")


class CodingObservation(Observation):
    task_id: str = Field(description="The task of this episode")
    prompt: str = Field(description="What to write")
    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    timed_out: bool = False
    killed_by: str | None = None
    duration_s: float | None = None
    tests_passed: int | None = Field(default=None, description="Hidden tests passed (after submit)")
    tests_total: int | None = None
    steps_left: int = 0


class CodingState(State):
    task_id: str | None = None
    submitted: bool = False
    last_code: str = ""


class SandboxedMetadata(EnvironmentMetadata):
    """``/metadata`` plus the isolation boundary the env's code execution uses."""

    sandbox: dict[str, Any] = Field(default_factory=dict)


def _run_dict(result: ExecResult) -> dict[str, Any]:
    return {"exit_code": result.exit_code, "stdout": result.stdout, "stderr": result.stderr,
            "timed_out": result.timed_out, "killed_by": result.killed_by, "duration_s": result.duration_s}


class CodingEnv(ToolEnvironment[CodeAction, CodingObservation, CodingState]):
    """Write, run, fix and submit Python solutions to small tasks with hidden tests."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    #: Snapshots hold the task, the episode's counters and last code, and the last observation
    #: (code runs in a fresh process per call, so there is nothing else to carry).
    SUPPORTS_SNAPSHOT = True
    BLOCKING = True  # every step waits on a sandboxed process
    tool_timeout_s = 120.0
    #: Limits of ``run_code`` and plain runs (hidden tests use ``tasks.TEST_LIMITS``).
    run_limits: ClassVar[Limits] = RUN_LIMITS
    #: The server scores each step with this rubric: the pass rate of the hidden tests on a step
    #: that graded code (``metadata["tests"]``), 0.0 on any other step.
    rubric = CodeTestPassRate(name="pass_rate", results=TESTS_FIELD, missing_score=0.0, empty_score=0.0)

    def __init__(self, tasks_file: str | None = None, max_steps: int = DEFAULT_MAX_STEPS,
                 sandbox: Sandbox | None = None, limits: Limits | None = None) -> None:
        super().__init__()
        if max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {max_steps}")
        self._tasks = load_tasks(tasks_file)
        self._max_steps = max_steps
        self._sandbox = sandbox
        self._limits = limits or self.run_limits
        self._task: Task = self._tasks[0]
        #: The grade of the current step, if it graded code (``metadata["tests"]``).
        self._graded: dict[str, int] | None = None
        #: How that grading went (``metadata["grade"]``): each failed test's reason, the grader uid.
        self._grade_info: dict[str, Any] = {}
        self._state = CodingState(episode_id=str(uuid.uuid4()), task_id=self._task.id)
        self._last: Observation | None = None

    @property
    def sandbox(self) -> Sandbox:
        if self._sandbox is None:
            self._sandbox = default_sandbox()
        return self._sandbox

    # -- protocol -------------------------------------------------------------------------------

    def reset(self, seed: int | None = None, episode_id: str | None = None,  # type: ignore[override]
              task_id: str | None = None, tasks_file: str | None = None, task: DeclaredTask | None = None,
              **kwargs: Any) -> CodingObservation:
        if tasks_file is not None:
            self._tasks = load_tasks(tasks_file)
        if task is not None:  # a declared task (openenv.tasks): its data is the whole task
            task = checked_task(task, "to pick a built-in task by id, pass task_id=...")
            try:
                self._task = Task.from_dict({**task.data, "id": task.id}, f"task {task.id!r}")
            except TaskError as exc:
                raise ValidationError(str(exc)) from None
        elif task_id is not None:
            by_id = {t.id: t for t in self._tasks}
            if task_id not in by_id:
                raise ValidationError(f"unknown task_id {task_id!r}.{did_you_mean(task_id, list(by_id))} "
                                      f"known: {sorted(by_id)}")
            self._task = by_id[task_id]
        else:
            self._task = random.Random(seed).choice(self._tasks)
        self._state = CodingState(episode_id=episode_id or str(uuid.uuid4()), task_id=self._task.id,
                                  last_code=self._task.starter)
        return self._observation(stderr="", stdout=f"Starter code:\n{self._task.starter}")

    @property
    def state(self) -> CodingState:  # type: ignore[override]
        return self._state

    def _count_step(self) -> None:
        self._state.step_count += 1

    def step(self, action: Action, timeout_s: float | None = None,  # type: ignore[override]
             **kwargs: Any) -> Observation:
        if self._state.submitted:
            return self._observation(stderr="the episode is over (submitted); call reset() for a new task",
                                     done=True, reward=0.0)
        self._graded = None
        obs = super().step(action, timeout_s=timeout_s, **kwargs)
        if not obs.done and self._state.step_count >= self._max_steps:
            outcomes = self._submit(self._state.last_code)
            obs.done = True
            obs.reward = pass_rate(outcomes)
            obs.metadata = {**obs.metadata, "budget_exhausted": True, "tests_passed": sum(o.passed for o in outcomes),
                            "tests_total": len(outcomes)}
        if self._graded is not None:  # this step graded code (plain submit, submit tool, budget)
            obs.metadata = {**obs.metadata, "tests": self._graded, "grade": self._grade_info}
        self._last = obs
        return obs

    # The observations every step path builds (the async tool path does not go through ``step``):
    # the last one is what a snapshot restores.
    def _list_observation(self) -> ListToolsObservation:
        obs = super()._list_observation()
        self._last = obs
        return obs

    def _call_observation(self, action: CallToolAction, spec: ToolSpec | None, value: Any,
                          failure: ToolCallError | None) -> CallToolObservation:
        obs = super()._call_observation(action, spec, value, failure)
        self._last = obs
        return obs

    def snapshot(self) -> dict[str, Any]:
        last = self._last
        return {"task": {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self._task).items()},
                "state": self._state.model_dump(),
                "last": None if last is None else {"kind": type(last).__name__, "data": last.model_dump()}}

    def restore(self, data: dict[str, Any]) -> Observation:  # type: ignore[override]  # a tool step's type too
        try:
            task = Task.from_dict(data.get("task"), "the snapshot's task")
            state = CodingState.model_validate(data.get("state"))
        except (TaskError, ValueError) as exc:
            raise ValueError(f"not a coding snapshot: {exc}") from None
        if state.task_id != task.id or not 0 <= state.step_count <= self._max_steps:
            raise ValueError("not a coding snapshot: its state names another task or more steps than max_steps")
        last = data.get("last")
        kinds: dict[str, type[Observation]] = {t.__name__: t for t in (CodingObservation, CallToolObservation,
                                                                          ListToolsObservation)}
        self._task, self._state = task, state
        if isinstance(last, dict) and last.get("kind") in kinds:
            self._last = kinds[last["kind"]].model_validate({**last.get("data", {}), "reward": None})
        else:
            self._last = self._observation(stdout=f"Starter code:\n{task.starter}")
        return self._last

    def step_other(self, action: Action, timeout_s: float | None = None, **kwargs: Any) -> Observation:
        assert isinstance(action, CodeAction)
        if action.submit:
            outcomes = self._submit(action.code)
            return self._observation(done=True, reward=pass_rate(outcomes), stdout=_failures(outcomes),
                                     tests_passed=sum(o.passed for o in outcomes), tests_total=len(outcomes))
        result = self._run(action.code)
        return self._observation(reward=0.0, **_run_dict(result))

    # -- tools ----------------------------------------------------------------------------------

    @tool
    def run_code(self, code: str) -> dict[str, Any]:
        """Run Python code in the sandbox and return its exit code, stdout and stderr.

        Args:
            code: Python source, run as a fresh program.
        """
        return _run_dict(self._run(code))

    @tool
    def run_tests(self, code: str) -> dict[str, Any]:
        """Run the task's visible example tests against the code.

        Args:
            code: The candidate solution.
        """
        self._state.last_code = code
        outcomes = grade(self.sandbox, code, self._task.examples)
        return {"passed": sum(o.passed for o in outcomes), "total": len(outcomes),
                "failures": [{"test": o.test, "detail": o.detail} for o in outcomes if not o.passed]}

    @tool
    def submit(self, code: str) -> dict[str, Any]:
        """Grade the code against the hidden tests; ends the episode.

        Args:
            code: The final solution.
        """
        outcomes = self._submit(code)
        return {"passed": sum(o.passed for o in outcomes), "total": len(outcomes), "reward": pass_rate(outcomes)}

    def reward_for_tool_call(self, tool_name: str, arguments: dict[str, Any], result: Any,
                             error: Any) -> tuple[float | None, bool]:
        if tool_name == "submit" and isinstance(result, dict):
            return float(result["reward"]), True
        return 0.0, False

    def get_metadata(self) -> EnvironmentMetadata:
        return SandboxedMetadata(
            name="coding", version="0.1.0",
            description="Python coding tasks with hidden unit tests; code runs in openenv_sandbox.",
            sandbox=(self.__dict__.get("_sandbox") or default_sandbox()).boundary)

    # -- helpers --------------------------------------------------------------------------------

    def _run(self, code: str) -> ExecResult:
        self._state.last_code = code
        return self.sandbox.run_python(code, limits=self._limits)

    def _submit(self, code: str) -> list[TestOutcome]:
        self._state.last_code = code
        self._state.submitted = True
        outcomes = grade(self.sandbox, code, self._task.tests)
        self._graded = {"passed": sum(o.passed for o in outcomes), "total": len(outcomes)}
        self._grade_info = {"errors": [o.detail for o in outcomes if not o.passed],
                            "grader_uid": next((o.result.get("grader_uid") for o in outcomes), None)}
        return outcomes

    def _observation(self, **fields: Any) -> CodingObservation:
        obs = CodingObservation(task_id=self._task.id, prompt=self._task.prompt,
                                steps_left=max(self._max_steps - self._state.step_count, 0), **fields)
        self._last = obs
        return obs


def _failures(outcomes: list[TestOutcome]) -> str:
    passed = sum(o.passed for o in outcomes)
    lines = [f"{passed}/{len(outcomes)} hidden tests passed"]
    lines += [f"failed: {o.detail}" for o in outcomes if not o.passed]
    return "\n".join(lines)
