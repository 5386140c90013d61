"""A persistent Jupyter kernel per session, with graded data tasks.

Dynamics (all promises are tested):

* ``reset(seed=k, kind=None, max_steps=50)`` starts a fresh IPython kernel (``kernel.py``) in a new
  private folder and writes the task's data files there; its question is in the observation. The
  task is ``reset(task=...)``'s, or ``kind`` made from ``seed`` (no kind: the seed picks one);
  ``kind="free"`` gives a kernel without a task;
* ``{"kind": "execute", "code": ...}`` runs one cell: names, imports and files persist to the next
  step (the kernel is not re-run from history). The observation carries stdout, stderr, the value
  (``result``), rich displays (text and PNG as a data URL), the error with its traceback, and
  ``execution_count``. Past ``timeout_s`` the cell is interrupted and the kernel keeps its state
  (``status: timeout``); a kernel that dies (``os._exit``, out of memory) or ignores the interrupt is
  restarted (``status: restarted``, state lost) and the session goes on;
* ``{"kind": "restart"}`` gives a fresh kernel in the same folder;
* ``{"kind": "submit", "answer": ...}`` ends the episode: reward 1.0 for the right answer, else
  0.0, graded in this process from the task's seed (never in the kernel the agent controls);
* ``max_steps`` steps without a submission truncate the episode (reward 0);
* ``close()`` shuts the kernel down and kills its whole process group, so nothing it forked
  outlives the session; the folder is removed.
"""

from __future__ import annotations

import secrets
import shutil
import tempfile
import uuid
import weakref
from pathlib import Path
from typing import Any

from openenv.env import Environment
from openenv.errors import ValidationError, int_option
from openenv.tasks import Task, checked_task
from openenv.types import EnvironmentMetadata
from openenv_env_jupyter.kernel import KernelLimits, Outcome, PersistentKernel
from openenv_env_jupyter.models import JupyterAction, JupyterObservation, JupyterState
from openenv_env_jupyter.tasks import KINDS, Problem, grade, make_problem, task_source, write_files

__all__ = ["FREE", "JupyterEnv"]

_OPTIONS = {"kind", "max_steps"}
#: ``reset(kind=FREE)``: a kernel without a task (nothing to submit).
FREE = "free"


#: A bad action or reset option as one Pydantic-style error (the kernel's helper).
_refuse = ValidationError.of


class JupyterEnv(Environment[JupyterAction, JupyterObservation, JupyterState]):
    """One kernel per instance (session); instances share nothing."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    BLOCKING = True  # every step waits on the kernel process
    tasks = task_source()

    def __init__(self, *, limits: KernelLimits | None = None) -> None:
        super().__init__()
        self.limits = limits or KernelLimits()
        self._kernel: PersistentKernel | None = None
        self._folder: Path | None = None
        self._problem: Problem | None = None
        self._task_id: str | None = None
        self._steps = 0
        self._max_steps = 50
        self._done = False
        self._episode_id: str | None = None

    # -- protocol ---------------------------------------------------------------------------------

    def reset(self, seed: int | None = None, episode_id: str | None = None, task: Task | None = None,
              **kwargs: Any) -> JupyterObservation:
        task_id = None
        if task is not None:
            task = checked_task(task)
            seed = task.seed if task.seed is not None else seed
            kwargs, task_id = {**kwargs, **task.data}, task.id
        unknown = sorted(set(kwargs) - _OPTIONS)
        if unknown:
            raise _refuse(f"unknown reset option(s) {unknown}; the Jupyter env accepts {sorted(_OPTIONS)}",
                          kind="unknown_option", loc=unknown[0])
        kind = kwargs.get("kind")
        if kind != FREE and kind is not None and kind not in KINDS:
            import difflib

            close = difflib.get_close_matches(str(kind), list(KINDS), n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"the kinds are {[*sorted(KINDS), FREE]}"
            raise _refuse(f"unknown task kind {kind!r}; {hint}", kind="unknown_kind", loc="kind", value=kind)
        max_steps = int_option(kwargs, "max_steps", 50, 1, 10_000)
        self._shutdown()
        self._problem = None
        if kind != FREE:
            seed = seed if seed is not None else secrets.randbelow(2**31)
            # Without a kind the seed picks one, so every seeded episode is a graded task.
            kind = kind or sorted(KINDS)[seed % len(KINDS)]
            self._problem = make_problem(kind, seed)
            task_id = task_id or f"{kind}-seed-{seed}"
        self._folder = Path(tempfile.mkdtemp(prefix="openenv-jupyter-"))
        if self._problem is not None:
            write_files(self._problem, self._folder)
        self._kernel = PersistentKernel(self._folder, self.limits)
        # The task folder goes with the kernel, also when the env is dropped without close().
        weakref.finalize(self._kernel, shutil.rmtree, self._folder, True)
        self._task_id, self._max_steps, self._steps, self._done = task_id, max_steps, 0, False
        self._episode_id = episode_id or str(uuid.uuid4())
        return self._observe(Outcome(status="ready"), reward=0.0)

    def step(self, action: JupyterAction, timeout_s: float | None = None, **kwargs: Any) -> JupyterObservation:
        if self._kernel is None:
            raise _refuse("No episode in progress: call reset() before step().", kind="no_episode")
        if self._done:
            raise _refuse("The episode is over (answer submitted or step limit): call reset().", kind="episode_over")
        if action.kind == "submit" and self._problem is None:
            raise _refuse("There is no task to answer in this episode: reset with a task (task_id=... or kind=...) "
                          "to submit, or keep executing code.", kind="no_task", loc="kind", value="submit")
        self._steps += 1
        reward, metadata = 0.0, dict[str, Any](step=self._steps)
        if action.kind == "execute":
            limit = action.timeout_s if timeout_s is None else min(action.timeout_s, timeout_s)
            outcome = self._kernel.execute(action.code, limit)
        elif action.kind == "restart":
            self._kernel.restart()
            outcome = Outcome(status="restarted", stderr="The kernel was restarted on request; its state is lost.\n")
        else:
            assert self._problem is not None
            reward, verdict = grade(self._problem, action.answer)
            metadata["grade"] = verdict
            outcome = Outcome(status="submitted")
            self._done = True
        truncated = not self._done and self._steps >= self._max_steps
        self._done = self._done or truncated
        return self._observe(outcome, reward=reward, truncated=truncated, metadata=metadata)

    @property
    def state(self) -> JupyterState:
        kernel = self._kernel
        return JupyterState(episode_id=self._episode_id, step_count=self._steps, task_id=self._task_id,
                            kernel_pid=kernel.pid if kernel else None, network=kernel.network if kernel else "",
                            done=self._done)

    def get_metadata(self) -> EnvironmentMetadata:
        return EnvironmentMetadata(
            name="jupyter",
            description="A persistent IPython kernel per session: execute cells (state persists), restart, "
            "and submit the answer of a data task (graded outside the kernel).",
            version="0.1.0",
        )

    def close(self) -> None:
        self._shutdown()

    # -- helpers ----------------------------------------------------------------------------------

    def _shutdown(self) -> None:
        if self._kernel is not None:
            self._kernel.close()
            self._kernel = None
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            self._folder = None

    def _observe(self, outcome: Outcome, *, reward: float, truncated: bool = False,
                 metadata: dict[str, Any] | None = None) -> JupyterObservation:
        files = sorted(p.name for p in self._folder.iterdir()) if self._folder is not None else []
        return JupyterObservation(
            status=outcome.status, stdout=outcome.stdout, stderr=outcome.stderr, result=outcome.result,
            displays=outcome.displays, error=outcome.error, execution_count=outcome.execution_count,
            question=self._problem.question if self._problem else "", files=files[:200],
            steps_left=self._max_steps - self._steps, truncated=truncated, reward=reward, done=self._done,
            metadata=metadata or {},
        )
