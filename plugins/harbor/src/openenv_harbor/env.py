"""``harbor``: a Harbor task suite served as an env (``openenv serve harbor:PATH``).

Promises:

* ``HarborEnv.from_spec(PATH)`` (the kernel's ``NAME:ARG`` seam) reads PATH, a task folder or a
  folder of them, and returns an env class whose ``tasks`` are the suite's tasks: each task's id is
  its folder name, its split ``[metadata] split`` (default ``test``). A broken task folder is left
  out with a warning naming the task and the file; the rest of the suite is served.
* ``reset(task_id=...)`` sets the task up in a fresh bubblewrap box (the local runtime,
  :mod:`openenv_harbor.box`), or, for a Dockerfile the local runtime cannot run, in a container
  built offline (:mod:`openenv_harbor.docker`, when an engine answers); the observation carries
  the instruction. ``runtime="kubernetes"`` (or ``$OPENENV_HARBOR_RUNTIME=kubernetes``) runs every
  task in a Pod instead (:mod:`openenv_harbor.k8s`); ``"docker"`` and ``"local"`` force those runtimes,
  ``"auto"`` (the default) is the choice above.
* ``step({"command": "..."})`` runs ``bash -c command`` in the box (cwd the task's WORKDIR, no
  network, the task's memory/cpus), cut at the time the agent has left. ``step({"submit": true})``,
  the agent's ``[agent] timeout_sec`` running out or the step budget ends the episode: the workspace
  is graded in a separate fresh box (:func:`openenv_harbor.box.grade`) and the reward is the
  verifier's; a failed grading is reward 0 with ``grade.error`` (and ``metadata["grade_error"]``)
  saying why.
* ``close`` deletes the box folders.
"""

from __future__ import annotations

import logging
import os
import random
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field

from openenv.env import Environment
from openenv.errors import ConfigError, ValidationError
from openenv.tasks import InlineTasks
from openenv.tasks import Task as DeclaredTask
from openenv.types import Action, Observation, State
from openenv_harbor import docker as docker_rt
from openenv_harbor import k8s as k8s_rt
from openenv_harbor.box import Grade, Workspace, exec_command, grade, prepare
from openenv_harbor.task import HarborTask, HarborTaskError, Suite, load_suite

if TYPE_CHECKING:
    from openenv.cli.validate_cmd import Report

__all__ = ["DEFAULT_MAX_STEPS", "DEMO_SUITE", "RUNTIMES", "HarborAction", "HarborEnv", "HarborObservation",
           "HarborState"]

log = logging.getLogger(__name__)
#: What bare ``harbor`` (no ``:PATH``) serves: one tiny task shipped with the package.
DEMO_SUITE = str(Path(__file__).with_name("demo"))
DEFAULT_MAX_STEPS = 50
#: Where a task runs: ``auto`` (local box, Docker for a Dockerfile only Docker builds), or one runtime for all.
RUNTIMES = ("auto", "local", "docker", "kubernetes")


class HarborAction(Action):
    command: str = Field(default="", max_length=100_000, description="A shell command line (bash -c), run in the "
                         "task's WORKDIR")
    submit: bool = Field(default=False, description="End the episode and grade the workspace (after the command, "
                         "if one is given)")


class HarborObservation(Observation):
    task_id: str
    instruction: str
    output: str = Field(default="", description="The command's stdout and stderr (tail)")
    exit_code: int | None = None
    timed_out: bool = False
    duration_s: float = 0.0
    time_left_s: float = Field(default=0.0, description="Seconds of [agent] timeout_sec left")
    steps_left: int = 0
    task_dir: str = Field(default="", description="The task's folder on the server (hidden inside the box)")
    grade: dict[str, Any] | None = Field(default=None, description="The separate-box grading, once the episode ended")


class HarborState(State):
    task_id: str | None = None
    graded: bool = False


class HarborEnv(Environment[HarborAction, HarborObservation, HarborState]):
    """Harbor tasks played with shell commands in a bubblewrap box and graded in a fresh one."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    BLOCKING = True
    #: The suite folder a ``from_spec`` class serves.
    suite_path: ClassVar[str | None] = None

    @classmethod
    def from_spec(cls, arg: str) -> type[HarborEnv]:
        """The env class serving the suite at ``arg`` (``openenv serve harbor:PATH``)."""
        path = Path(arg).expanduser().resolve()
        try:
            suite = load_suite(path)
        except HarborTaskError as exc:
            raise ConfigError(f"harbor:{arg}: {exc}") from None
        for name, error in suite.errors.items():
            log.warning("harbor: task %s left out: %s", name, error)
        if not suite.tasks:
            raise ConfigError(f"harbor:{arg}: no task of the suite loads: "
                              + "; ".join(str(e) for e in suite.errors.values()))
        rows = [{"id": t.id, "split": t.split, "difficulty": t.metadata.get("difficulty"),
                 "category": t.metadata.get("category")} for t in suite.tasks]
        return type("HarborEnv", (cls,), {"suite_path": str(path), "tasks": InlineTasks(rows, name=str(path)),
                                          "__module__": cls.__module__, "__qualname__": "HarborEnv"})

    @classmethod
    def validate_spec(cls, arg: str) -> Report:
        """``openenv validate harbor:PATH``: every task's oracle (1) and no-op agent (0), a row per task."""
        from openenv_harbor.validate import report_of, validate_suite

        try:
            checks = validate_suite(Path(arg).expanduser())
        except HarborTaskError as exc:
            raise ConfigError(f"harbor:{arg}: {exc}") from None
        return report_of(arg, checks)

    def __init__(self, path: str | None = None, max_steps: int = DEFAULT_MAX_STEPS,
                 scratch: str | None = None, grader_uid: int | str | None = "default",
                 runtime: str | None = None) -> None:
        super().__init__()
        folder = path or self.suite_path or DEMO_SUITE
        if max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {max_steps}")
        runtime = runtime or os.environ.get("OPENENV_HARBOR_RUNTIME") or "auto"
        if runtime not in RUNTIMES:
            raise ConfigError(f"harbor runtime {runtime!r} is not one of {', '.join(RUNTIMES)} (the runtime "
                              "argument, or $OPENENV_HARBOR_RUNTIME)")
        self._runtime = runtime
        self._suite: Suite = load_suite(folder)
        self._max_steps = max_steps
        self._scratch = Path(scratch) if scratch else None
        self._grader_uid = grader_uid
        self._tmp: Path | None = None
        self._ws: Workspace | None = None
        self._container: docker_rt.Container | None = None
        self._pod: k8s_rt.Pod | None = None
        self._task: HarborTask | None = None
        self._started = 0.0
        self._grade: Grade | None = None
        self._state = HarborState(episode_id=str(uuid.uuid4()))

    @property
    def workspace(self) -> Workspace | None:
        return self._ws

    @property
    def state(self) -> HarborState:  # type: ignore[override]
        return self._state

    def reset(self, seed: int | None = None, episode_id: str | None = None,  # type: ignore[override]
              task_id: str | None = None, task: DeclaredTask | None = None, **kwargs: Any) -> HarborObservation:
        wanted = task.id if isinstance(task, DeclaredTask) else task_id
        try:
            chosen = (self._suite.get(wanted) if wanted is not None
                      else random.Random(seed).choice(self._suite.tasks))
        except HarborTaskError as exc:
            raise ValidationError(str(exc), data={"task_id": wanted}) from None
        self._remove_box()
        try:
            if self._runtime == "kubernetes":
                self._pod = k8s_rt.start(chosen)
            elif self._runtime == "docker" or (self._runtime == "auto" and chosen.local_blocker
                                               and docker_rt.available()):  # a Dockerfile only Docker builds
                self._container = docker_rt.start(chosen)
            else:
                self._tmp = Path(tempfile.mkdtemp(prefix=f"harbor-{chosen.id}-", dir=self._scratch))
                self._ws = prepare(chosen, self._tmp / "agent")
        except HarborTaskError as exc:
            self._remove_box()
            raise ValidationError(str(exc), data={"task_id": chosen.id, "file": exc.file}) from None
        self._task, self._grade, self._started = chosen, None, time.monotonic()
        self._state = HarborState(episode_id=episode_id or str(uuid.uuid4()), task_id=chosen.id)
        return self._observation(reward=0.0)

    def step(self, action: HarborAction, timeout_s: float | None = None, **kwargs: Any) -> HarborObservation:
        if (self._ws is None and self._container is None and self._pod is None) or self._task is None:
            raise ValidationError("no task set up yet: call reset(task_id=...) first")
        if self._state.graded:
            return self._observation(output="the episode is over; call reset() for a new one", done=True,
                                     reward=self._grade.reward if self._grade else 0.0)
        self._state.step_count += 1
        fields: dict[str, Any] = {}
        container, ws, pod = self._container, self._ws, self._pod
        if action.command:
            limit = self._time_left()
            if timeout_s is not None:
                limit = min(limit, timeout_s)
            if pod is not None:
                result = k8s_rt.exec_command(pod, action.command, max(limit, 0.1))
            elif container is not None:
                result = docker_rt.exec_command(container, action.command, max(limit, 0.1))
            else:
                assert ws is not None
                result = exec_command(ws, action.command, max(limit, 0.1))
            fields = {"output": result.output, "exit_code": result.status, "timed_out": result.timed_out,
                      "duration_s": round(result.seconds, 6)}
        if action.submit or self._time_left() <= 0 or self._state.step_count >= self._max_steps:
            if pod is not None:
                self._grade = k8s_rt.grade(pod, self._scratch)
            elif container is not None:
                self._grade = docker_rt.grade(container, self._scratch)
            else:
                assert ws is not None
                self._grade = grade(ws, self._scratch, self._grader_uid)
            self._state.graded = True
            return self._observation(done=True, reward=self._grade.reward, **fields)
        return self._observation(reward=0.0, **fields)

    def close(self) -> None:
        self._remove_box()

    # -- helpers --------------------------------------------------------------------------------

    def _time_left(self) -> float:
        assert self._task is not None
        return self._task.agent_timeout_s - (time.monotonic() - self._started)

    def _observation(self, **fields: Any) -> HarborObservation:
        assert self._task is not None
        graded = self._grade.to_dict() if self._grade else None
        metadata = {"grade_error": self._grade.error} if self._grade and self._grade.error else {}
        return HarborObservation(task_id=self._task.id, instruction=self._task.instruction,
                                 time_left_s=round(max(self._time_left(), 0.0), 3),
                                 steps_left=self._max_steps - self._state.step_count, task_dir=str(self._task.path),
                                 grade=graded, metadata=metadata, **fields)

    def _remove_box(self) -> None:
        if self._pod is not None:
            pod, self._pod = self._pod, None
            k8s_rt.close(pod, remove_image=False)  # kept: the next reset of the task (or a concurrent one) uses it
        if self._container is not None:
            docker_rt.close(self._container)
            self._container = None
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
        self._tmp, self._ws = None, None
