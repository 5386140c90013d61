"""The shell (terminal) environment.

Promises:

* ``reset`` seeds a fresh working tree for the session from the task: a git repository made with
  the ``git`` CLI (files committed, then the task's ``after_commit`` changes left uncommitted).
* Each ``step({"command": ...})`` runs ``/bin/sh -c command`` in ``openenv_sandbox`` with the tree
  as the working directory: an unprivileged uid, no network, limits, killed at the wall-clock
  limit. The tree persists across the steps of that session only; nothing else does (every
  process of a command is killed when the command ends, so background jobs do not survive).
* After each command the tree is graded in a separate box (``openenv_sandbox.grade_copy``): the
  tree is copied (symlinks as links, never followed; git hooks and command-running config
  dropped) into a folder made for that grading only, and the task's check (Python from the task
  data, never from the tree) runs there in a fresh execution as the slot's grader uid (no agent
  command runs as it), with a private ``/tmp`` where the server may mount, no network, the copy
  as working directory but not on its ``sys.path`` (so no planted ``subprocess.py``,
  ``sitecustomize.py``, ... is imported by it); it runs the agent's code only in probe processes
  of its own (``python3 -I``), and cannot be traced by them. Its verdict is read fail-closed
  from a pipe only the check's own process holds; ``metadata["grade"]`` says how it went
  (``passed``, ``error`` naming why not, ``grader_uid``, ``tmp``, ``seconds``). Passing gives
  reward 1.0 and ends the episode. The step budget ends it with reward 0.0 otherwise.
* Limits: ``ShellEnv(limits=..., check_limits=...)`` (defaults ``COMMAND_LIMITS``/``CHECK_LIMITS``);
  every observation reports the command's ``limits`` and ``duration_s``.
* ``close`` deletes the tree.
* The shipped tasks are declared to the task API (``openenv.yaml``'s ``tasks: {file: tasks.jsonl}``:
  5 ``train``, 3 ``test``); the server's ``reset(task_id=...)`` arrives as
  ``reset(task=<openenv.tasks.Task>)``, whose data (instructions, files, check, ...) is the task played.
"""

from __future__ import annotations

import base64
import io
import json
import os
import random
import shutil
import subprocess
import tarfile
import uuid
from dataclasses import asdict, dataclass, field
from importlib.resources import files
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from openenv.env import Environment
from openenv.errors import ValidationError, did_you_mean
from openenv.tasks import Task as DeclaredTask
from openenv.tasks import checked_task
from openenv.types import Action, EnvironmentMetadata, Observation, State
from openenv_sandbox import Limits, Sandbox, Verdict, default_sandbox, grade_copy

__all__ = ["ShellAction", "ShellEnv", "ShellObservation", "ShellState", "ShellTask", "load_tasks", "shell_task"]

DEFAULT_MAX_STEPS = 20
COMMAND_LIMITS = Limits(cpu_time_s=5, wall_time_s=10.0, output_bytes=32 * 1024)
CHECK_LIMITS = Limits(cpu_time_s=5, wall_time_s=10.0, output_bytes=8 * 1024)
_GIT_ENV = {"GIT_AUTHOR_NAME": "openenv", "GIT_AUTHOR_EMAIL": "agent@openenv.invalid",
            "GIT_COMMITTER_NAME": "openenv", "GIT_COMMITTER_EMAIL": "agent@openenv.invalid",
            "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_TERMINAL_PROMPT": "0"}
#: Largest tree graded (entries, bytes of files): a bigger one is reward 0 with the reason.
GRADE_MAX_FILES = 5000
GRADE_MAX_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class ShellTask:
    id: str
    instructions: str
    check: str
    files: dict[str, str] = field(default_factory=dict)
    after_commit: dict[str, str] = field(default_factory=dict)
    solution: str = ""


def shell_task(data: Any, where: str) -> ShellTask:
    """The task a JSON row describes; ``ValueError`` naming ``where`` and the fields it needs."""
    # ``split`` is read by the kernel's task API (``openenv.tasks.TaskFile``), not by the env.
    allowed = {"id", "split", "instructions", "check", "files", "after_commit", "solution"}
    if not isinstance(data, dict) or not {"id", "instructions", "check"} <= set(data) or set(data) - allowed:
        got = sorted(data) if isinstance(data, dict) else repr(data)
        raise ValueError(f"{where}: a shell task is an object with id, instructions and check "
                         f"(optional: split, files, after_commit, solution); got {got}")
    return ShellTask(**{k: v for k, v in data.items() if k != "split"})


def load_tasks(path: str | Path | None = None) -> list[ShellTask]:
    """Tasks from a JSONL file (``None``: the ones shipped with the package)."""
    if path is None:
        text, where = files("openenv_env_shell").joinpath("tasks.jsonl").read_text(encoding="utf-8"), "tasks.jsonl"
    else:
        text, where = Path(path).read_text(encoding="utf-8"), str(path)
    tasks = [shell_task(json.loads(line), f"{where}:{number}")
             for number, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not tasks:
        raise ValueError(f"{where}: no tasks")
    return tasks


class ShellAction(Action):
    command: str = Field(min_length=1, max_length=100_000, description="A shell command line (/bin/sh -c)")


class ShellObservation(Observation):
    task_id: str
    instructions: str
    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    timed_out: bool = False
    killed_by: str | None = None
    cwd: str = Field(default="", description="The session's working tree (every command starts here)")
    duration_s: float = Field(default=0.0, description="Wall-clock seconds the command took")
    limits: dict[str, Any] = Field(default_factory=dict, description="The limits each command runs under")
    solved: bool = False
    steps_left: int = 0


class ShellState(State):
    task_id: str | None = None
    solved: bool = False


class SandboxedMetadata(EnvironmentMetadata):
    sandbox: dict[str, Any] = Field(default_factory=dict)


def _git(tree: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=tree, check=True, capture_output=True, timeout=30,
                   env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tree), **_GIT_ENV})


def _write(tree: Path, contents: dict[str, str]) -> None:
    for name, text in contents.items():
        target = (tree / name).resolve()
        if tree.resolve() not in target.parents:
            raise ValueError(f"task file {name!r} would land outside the tree")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


class ShellEnv(Environment[ShellAction, ShellObservation, ShellState]):
    """Shell commands in a per-session sandboxed git working tree, checked by the task's script."""

    SUPPORTS_CONCURRENT_SESSIONS = True
    #: Snapshots hold the task and the working tree (its files and git history, gzipped tar, at most
    #: ``SNAPSHOT_MAX_BYTES``), not running processes: every command ends within its step anyway.
    SUPPORTS_SNAPSHOT = True
    SNAPSHOT_MAX_BYTES: ClassVar[int] = 8 * 1024 * 1024
    BLOCKING = True
    #: Limits of each command and of each task check (``ShellEnv(limits=, check_limits=)`` overrides).
    command_limits: ClassVar[Limits] = COMMAND_LIMITS
    check_limits: ClassVar[Limits] = CHECK_LIMITS

    def __init__(self, tasks_file: str | None = None, max_steps: int = DEFAULT_MAX_STEPS,
                 sandbox: Sandbox | None = None, limits: Limits | None = None,
                 check_limits: Limits | None = None) -> None:
        super().__init__()
        self._limits = limits or self.command_limits
        self._check_limits = check_limits or self.check_limits
        for given in (self._limits, self._check_limits):
            if not isinstance(given, Limits):
                raise TypeError(f"limits must be openenv_sandbox.Limits, got {type(given).__name__}")
        if max_steps < 1:
            raise ValueError(f"max_steps must be at least 1, got {max_steps}")
        if shutil.which("git") is None:
            raise RuntimeError("the shell env seeds each session's tree with the git CLI, which is not on PATH; "
                               "install git (e.g. apt-get install git), or in a container image build it on a "
                               "base with git: openenv build envs/shell --base-image openenv-base:bookworm-git")
        self._tasks = load_tasks(tasks_file)
        self._max_steps = max_steps
        self._sandbox = sandbox
        self._task = self._tasks[0]
        self._tree: Path | None = None
        self._state = ShellState(episode_id=str(uuid.uuid4()), task_id=self._task.id)
        self._last: dict[str, Any] = {}

    @property
    def sandbox(self) -> Sandbox:
        if self._sandbox is None:
            self._sandbox = default_sandbox()
        return self._sandbox

    @property
    def tree(self) -> Path | None:
        return self._tree

    def reset(self, seed: int | None = None, episode_id: str | None = None,  # type: ignore[override]
              task_id: str | None = None, task: DeclaredTask | None = None,
              **kwargs: Any) -> ShellObservation:
        if task is not None:  # a declared task (openenv.tasks): its data is the whole task
            task = checked_task(task, "to pick a shipped task by id, pass task_id=...")
            try:
                self._task = shell_task({**task.data, "id": task.id}, f"task {task.id!r}")
            except ValueError as exc:
                raise ValidationError(str(exc)) from None
        elif task_id is not None:
            by_id = {t.id: t for t in self._tasks}
            if task_id not in by_id:
                raise ValidationError(f"unknown task_id {task_id!r}.{did_you_mean(task_id, list(by_id))} "
                                      f"known: {sorted(by_id)}")
            self._task = by_id[task_id]
        else:
            self._task = random.Random(seed).choice(self._tasks)
        self._remove_tree()
        tree = self.sandbox.make_tree(prefix="shell-")
        self._tree = tree
        _write(tree, self._task.files)
        _git(tree, "init", "-q", "-b", "main")
        _git(tree, "add", "-A")
        _git(tree, "commit", "-q", "-m", f"task {self._task.id}")
        _write(tree, self._task.after_commit)
        self._state = ShellState(episode_id=episode_id or str(uuid.uuid4()), task_id=self._task.id)
        return self._observation(reward=0.0)

    @property
    def state(self) -> ShellState:  # type: ignore[override]
        return self._state

    def step(self, action: ShellAction, timeout_s: float | None = None, **kwargs: Any) -> ShellObservation:
        if self._tree is None:
            raise ValidationError("no working tree yet: call reset() first")
        if self._state.solved or self._state.step_count >= self._max_steps:
            return self._observation(stderr="the episode is over; call reset() for a new one", done=True, reward=0.0)
        self._state.step_count += 1
        limits = self._limits
        if timeout_s is not None and timeout_s < limits.wall_time_s:
            limits = Limits(**{**limits.to_dict(), "wall_time_s": max(timeout_s, 0.1)})
        result = self.sandbox.run_command(action.command, workdir=self._tree, limits=limits, env=_GIT_ENV)
        verdict = self._check()
        solved = verdict.passed
        self._state.solved = solved
        done = solved or self._state.step_count >= self._max_steps
        return self._observation(stdout=result.stdout, stderr=result.stderr, exit_code=result.exit_code,
                                 timed_out=result.timed_out, killed_by=result.killed_by, solved=solved,
                                 duration_s=round(result.duration_s, 6), limits=result.limits,
                                 done=done, reward=1.0 if solved else 0.0, metadata={"grade": verdict.to_dict()})

    def close(self) -> None:
        self._remove_tree()

    def snapshot(self) -> dict[str, Any]:
        if self._tree is None:
            raise ValidationError("no working tree yet: call reset() first")
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
            tar.add(self._tree, arcname=".")  # symlinks are stored as links, never followed
        if buffer.tell() > self.SNAPSHOT_MAX_BYTES:
            raise ValidationError(f"the working tree is {buffer.tell()} bytes compressed, over the "
                                  f"{self.SNAPSHOT_MAX_BYTES} a snapshot may carry: remove build output or large "
                                  "files from it first")
        return {"task": asdict(self._task), "tree": base64.b64encode(buffer.getvalue()).decode("ascii"),
                "steps": self._state.step_count, "solved": self._state.solved,
                "episode_id": self._state.episode_id, "last": self._last}

    def restore(self, data: dict[str, Any]) -> ShellObservation:
        steps, solved, last, tree_b64 = data.get("steps"), data.get("solved"), data.get("last"), data.get("tree")
        if (type(steps) is not int or not 0 <= steps <= self._max_steps or type(solved) is not bool
                or not isinstance(last, dict) or not isinstance(tree_b64, str)
                or len(tree_b64) > self.SNAPSHOT_MAX_BYTES * 4 // 3 + 4):
            raise ValueError("not a shell snapshot: steps within max_steps, solved, the last output and the tree")
        task = shell_task(data.get("task"), "the snapshot's task")
        try:
            raw = base64.b64decode(tree_b64, validate=True)
        except ValueError:
            raise ValueError("not a shell snapshot: the tree is not base64") from None
        tree = self.sandbox.make_tree(prefix="shell-")
        try:
            with tarfile.open(fileobj=io.BytesIO(raw), mode="r:gz") as tar:
                # The "data" filter refuses absolute paths, links out of the tree, devices and
                # set-id bits: a snapshot comes from a client.
                tar.extractall(tree, filter="data")
        except (tarfile.TarError, OSError, EOFError) as exc:
            shutil.rmtree(tree, ignore_errors=True)
            raise ValueError(f"not a shell snapshot: the tree does not unpack ({exc})") from None
        self._remove_tree()
        self._task, self._tree = task, tree
        self._state = ShellState(episode_id=str(data.get("episode_id") or uuid.uuid4()), task_id=task.id,
                                 step_count=steps, solved=solved)
        kept = {k: last[k] for k in ("stdout", "stderr", "exit_code", "timed_out", "killed_by", "solved",
                                     "duration_s", "limits", "done", "metadata") if k in last}
        if not isinstance(kept.get("metadata", {}), dict):
            raise ValueError("not a shell snapshot: the last observation's metadata is not an object")
        return self._observation(**kept, reward=None)

    def get_metadata(self) -> EnvironmentMetadata:
        return SandboxedMetadata(
            name="shell", version="0.1.0",
            description="Shell commands in a per-session git working tree; every command runs in openenv_sandbox.",
            sandbox=(self.__dict__.get("_sandbox") or default_sandbox()).boundary)

    # -- helpers --------------------------------------------------------------------------------

    def _check(self) -> Verdict:
        """The task's check on a copy of the tree, in a separate grading execution (fail closed)."""
        assert self._tree is not None
        return grade_copy(self.sandbox, self._task.check, tree=self._tree, limits=self._check_limits, env=_GIT_ENV,
                          git=True, max_files=GRADE_MAX_FILES, max_bytes=GRADE_MAX_BYTES)

    def _remove_tree(self) -> None:
        if self._tree is not None:
            if self._sandbox is not None:
                self._sandbox.remove_tree(self._tree)
            else:
                shutil.rmtree(self._tree, ignore_errors=True)
            self._tree = None

    def _observation(self, **fields: Any) -> ShellObservation:
        fields.setdefault("limits", self._limits.to_dict())
        self._last = {k: v for k, v in fields.items() if k != "reward"}
        return ShellObservation(task_id=self._task.id, instructions=self._task.instructions,
                                cwd=os.fspath(self._tree or ""),
                                steps_left=max(self._max_steps - self._state.step_count, 0), **fields)
