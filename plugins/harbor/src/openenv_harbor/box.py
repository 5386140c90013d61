"""The local runtime: Harbor tasks in bubblewrap boxes, graded in a separate box (python3 stdlib only).

A box's ``/`` is the host's, read-only; ``/app``, ``/tests``, ``/logs`` and ``/solution`` are bound
from a :class:`BoxDirs` folder; ``/tmp`` is private; there is no network and an own pid namespace,
so every process a command starts dies with it (nothing the agent leaves running survives the
command, let alone reaches grading). The task's suite folder and the source checkout around it
(tests and solutions) are hidden under an empty tmpfs in every box (:func:`hidden_paths`).

Grading (:func:`grade`) never runs in the agent's box: the agent's ``/app`` is copied (symlinks
copied as links, never followed) into a fresh box, the task's original ``tests/`` is copied to
``/tests``, ``/logs/verifier`` starts empty, git's hooks and command-running config are defused,
and ``bash /tests/test.sh`` runs as another user (uid 65534 when this process is root) with cwd
``/app``, with Python's ``PYTHONSAFEPATH`` (the cwd is never put on ``sys.path``). The reward is
read fail-closed (:func:`read_reward`): anything but one finite number in
[0, 1] is reward 0 with an error naming why.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from openenv_harbor.gitdefuse import defuse_tree, forced_env
from openenv_harbor.task import HarborTask, HarborTaskError

__all__ = ["BASE_ENV", "GRADER_UID", "BoxDirs", "BoxResult", "Grade", "Workspace", "box_run", "bwrap_problem",
           "default_grader_uid",
           "exec_command", "grade", "hidden_paths", "prepare", "read_reward", "run_noop", "run_oracle", "snapshot"]

#: The box's environment before the Dockerfile's ENV lines: HOME on the private /tmp so that no
#: ambient ~/.gitconfig (identity, aliases) of this machine can make a task pass here only.
BASE_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/tmp",
            "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TERM": "dumb"}
MOUNTS = ("app", "tests", "logs", "solution")
#: The user the verifier runs as when this process may switch users (root with setpriv).
GRADER_UID = 65534
OUTPUT_TAIL = 16_000


@dataclass(frozen=True)
class BoxDirs:
    """The host folders bound to /app, /tests, /logs and /solution of one box."""

    root: Path

    def make(self) -> BoxDirs:
        for name in MOUNTS:
            (self.root / name).mkdir(parents=True, exist_ok=True)
        (self.root / "logs" / "verifier").mkdir(exist_ok=True)
        (self.root / "logs" / "agent").mkdir(exist_ok=True)
        return self

    @property
    def app(self) -> Path:
        return self.root / "app"


@dataclass
class Workspace:
    """A task set up in a box folder: its WORKDIR and environment (from the Dockerfile)."""

    task: HarborTask
    dirs: BoxDirs
    workdir: str
    env: dict[str, str]


@dataclass
class BoxResult:
    """One command's end: exit status (124: the time limit hit), output tail, seconds."""

    status: int
    output: str
    seconds: float

    @property
    def timed_out(self) -> bool:
        return self.status == 124


@dataclass
class Grade:
    """A verifier's verdict: the reward (0 on any error: fail closed), its components and why it failed."""

    reward: float
    components: dict[str, float] = field(default_factory=dict)
    error: str = ""
    exit_code: int | None = None
    output: str = ""
    seconds: float = 0.0
    grader_uid: int | None = None

    def to_dict(self) -> dict[str, object]:
        return {"reward": self.reward, "components": self.components, "error": self.error,
                "exit_code": self.exit_code, "seconds": round(self.seconds, 3), "grader_uid": self.grader_uid}


def bwrap_problem() -> str:
    """Why bubblewrap cannot start a box here ("" when it can): not installed, or refused (no user
    namespaces, a seccomp profile...)."""
    if shutil.which("bwrap") is None:
        return "bubblewrap is not installed (bash .ci/bwrap-setup.sh)"
    probe = subprocess.run(["bwrap", "--ro-bind", "/", "/", "--unshare-net", "--unshare-pid", "--dev", "/dev",
                            "--proc", "/proc", "--", "true"], capture_output=True, text=True, timeout=30)
    return f"bwrap cannot start a box here: {probe.stderr.strip()}" if probe.returncode else ""


def default_grader_uid() -> int | None:
    """65534 when this process can switch users (root with setpriv), else None (grade as this user)."""
    return GRADER_UID if os.geteuid() == 0 and shutil.which("setpriv") else None


def _root_binds() -> list[str]:
    """The host's top-level folders, read-only, on the box's own root (so /app etc. can be made)."""
    args: list[str] = []
    for entry in sorted(Path("/").iterdir()):
        if entry.name in {"proc", "dev", "tmp", *MOUNTS}:
            continue
        if entry.is_symlink():
            args += ["--symlink", os.readlink(entry), str(entry)]
        elif entry.is_dir():
            args += ["--ro-bind", str(entry), str(entry)]
    return args


def hidden_paths(task: HarborTask) -> list[Path]:
    """What a box must not show: the task's suite folder and the source checkout holding it (its
    git objects and generators hold every task's tests and solution)."""
    suite = task.path.resolve().parent
    hidden = [suite]
    for folder in (suite, *suite.parents):
        if (folder / ".git").exists() and folder != Path("/"):
            hidden.append(folder)
            break
    return hidden


def _limits_prefix(task: HarborTask | None) -> list[str]:
    """``prlimit`` for [environment] memory_mb (address space) and ``taskset`` for cpus, where installed."""
    prefix: list[str] = []
    if task is None:
        return prefix
    if task.memory_mb and shutil.which("prlimit"):
        prefix += ["prlimit", f"--as={task.memory_mb * 1024 * 1024}", "--"]
    if task.cpus and shutil.which("taskset"):
        available = sorted(os.sched_getaffinity(0))
        count = max(1, min(len(available), math.ceil(task.cpus)))
        prefix += ["taskset", "-c", ",".join(str(c) for c in available[:count])]
    return prefix


def box_run(dirs: BoxDirs, argv: Sequence[str], cwd: str, env: dict[str, str], timeout_s: float, *,
            uid: int | None = None, hide: Sequence[Path] = (), task: HarborTask | None = None,
            network: bool = False) -> BoxResult:
    """Run argv in a bubblewrap box; every process in it is killed when argv ends or at ``timeout_s``.

    With ``uid``, the box runs as that user (setpriv drops root first; bwrap then needs its own user
    namespace). ``hide`` folders are covered by an empty tmpfs. Status 124: the time limit was hit."""
    cmd = ["bwrap", *_root_binds()]
    if uid is not None:
        cmd = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "bwrap", "--unshare-user",
               *_root_binds()]
    for folder in hide:
        resolved = folder.resolve()
        if resolved.is_dir() and not str(resolved).startswith("/tmp/") and resolved != Path("/"):
            cmd += ["--tmpfs", str(resolved)]  # (under /tmp it is hidden already: the box's /tmp is its own)
    for name in MOUNTS:
        cmd += ["--bind", str(dirs.root / name), f"/{name}"]
    if not network:
        cmd += ["--unshare-net"]
    cmd += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--dev", "/dev", "--proc", "/proc",
            "--tmpfs", "/tmp", "--remount-ro", "/", "--die-with-parent", "--chdir", cwd, "--",
            *_limits_prefix(task), *argv]
    start = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=env, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout_s)
        status = proc.returncode
    except subprocess.TimeoutExpired:
        # bwrap is the parent of the box's pid 1: killing its group ends every process inside.
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        status = 124
    return BoxResult(status, out.decode("utf-8", "replace")[-OUTPUT_TAIL:], time.monotonic() - start)


def _copy_into(src: Path, dest: Path) -> None:
    if src.is_dir():
        shutil.copytree(src, dest, symlinks=True, dirs_exist_ok=True)
    else:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest)


def _dockerfile_error(task: HarborTask, line: int, message: str) -> HarborTaskError:
    return HarborTaskError(f"task {task.id!r}: {task.dockerfile}:{line}: {message}", task=task.id,
                           file=str(task.dockerfile))


def _host_path(dirs: BoxDirs, box_path: str, task: HarborTask, line: int) -> Path:
    rel = os.path.normpath(box_path).lstrip("/")
    top, _, rest = rel.partition("/")
    if top != "app":
        raise _dockerfile_error(task, line, f"{box_path} is outside /app (a local task may only write its "
                                "workspace /app at set-up)")
    return dirs.app / rest


def prepare(task: HarborTask, root: Path) -> Workspace:
    """Materialise /app in a new box folder ``root`` from the Dockerfile (COPY, then each RUN in a box)."""
    if task.local_blocker:
        raise HarborTaskError(task.local_blocker, task=task.id, file=str(task.dockerfile))
    dirs = BoxDirs(root).make()
    context = task.path / "environment"
    workdir, env = "/app", dict(BASE_ENV)
    for step in task.steps:
        if step.kind == "WORKDIR":
            workdir = os.path.normpath(os.path.join(workdir, step.args[0]))
            _host_path(dirs, workdir, task, step.line).mkdir(parents=True, exist_ok=True)
        elif step.kind == "ENV":
            # $NAME / ${NAME} refer to the box's environment so far, as Docker's ENV does
            env[step.args[0]] = re.sub(r"\$\{?(\w+)\}?", lambda m: env.get(m[1], ""), step.args[1])
        elif step.kind == "COPY":
            *sources, dest = step.args
            target = _host_path(dirs, os.path.join(workdir, dest), task, step.line)
            for source in sources:
                matches = sorted(context.glob(source)) if any(c in source for c in "*?[") else [context / source]
                for match in matches:
                    inside = match.resolve() == context.resolve() or context.resolve() in match.resolve().parents
                    if not match.exists() or not inside:
                        raise _dockerfile_error(task, step.line, f"COPY source {source!r} is not a file or "
                                                "folder inside environment/")
                    into_dir = dest.endswith("/") or len(matches) > 1 or len(sources) > 1
                    _copy_into(match, target / match.name if match.is_file() and into_dir else target)
        else:  # RUN
            result = box_run(dirs, step.args, workdir, env, task.build_timeout_s, hide=hidden_paths(task), task=task,
                             network=task.allow_internet)
            if result.status != 0:
                raise _dockerfile_error(task, step.line, f"RUN exited {result.status}"
                                        + (" ([environment] build_timeout_sec hit)" if result.timed_out else "")
                                        + f":\n{result.output[-4000:]}")
    return Workspace(task, dirs, workdir, env)


def exec_command(ws: Workspace, command: str, timeout_s: float) -> BoxResult:
    """The agent's command (``bash -c``) in the workspace's box, cwd the task's WORKDIR."""
    return box_run(ws.dirs, ["bash", "-c", command], ws.workdir, ws.env, timeout_s, hide=hidden_paths(ws.task),
                   task=ws.task, network=ws.task.allow_internet)


def snapshot(ws: Workspace, root: Path) -> Workspace:
    """A copy of the workspace's /app in a new box folder (symlinks copied as links, never followed)."""
    dirs = BoxDirs(root).make()
    shutil.rmtree(dirs.app)
    shutil.copytree(ws.dirs.app, dirs.app, symlinks=True)
    return Workspace(ws.task, dirs, ws.workdir, dict(ws.env))


def read_reward(folder: Path) -> tuple[float | None, dict[str, float], str]:
    """The verifier's reward in ``folder`` (reward.txt, or reward.json's ``reward``), fail-closed.

    Returns (reward, components, "") or (None, {}, why): none written, both written, unparsable,
    not a number, non-finite or outside [0, 1]."""
    txt, js = folder / "reward.txt", folder / "reward.json"
    for path in (txt, js):
        if path.is_symlink() or (path.exists() and not path.is_file()):
            return None, {}, f"{path.name} is not a regular file"
    if txt.is_file() and js.is_file():
        return None, {}, "both reward.txt and reward.json were written (one reward, one file)"
    components: dict[str, float] = {}
    try:
        if txt.is_file():
            text = txt.read_text(encoding="utf-8").strip()
            if len(text.split()) != 1:
                return None, {}, f"reward.txt must hold one number, got {text[:80]!r}"
            value: object = float(text)
        elif js.is_file():
            doc = json.loads(js.read_text(encoding="utf-8"))
            if not isinstance(doc, dict) or "reward" not in doc:
                return None, {}, "reward.json must be a JSON object with a 'reward' key"
            value = doc["reward"]
            for key, part in doc.items():
                if key != "reward" and isinstance(part, int | float) and not isinstance(part, bool):
                    components[str(key)] = float(part)
        else:
            return None, {}, "the verifier wrote no /logs/verifier/reward.txt or reward.json"
    except (ValueError, UnicodeDecodeError) as exc:
        return None, {}, f"unreadable reward ({exc})"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None, {}, f"reward {value!r} is not a number"
    if not math.isfinite(value):
        return None, {}, f"reward {value!r} is not finite"
    if not 0.0 <= value <= 1.0:
        return None, {}, f"reward {value!r} is not a number in [0, 1]"
    return float(value), components, ""


def grade(ws: Workspace, scratch: Path | None = None, grader_uid: int | str | None = "default") -> Grade:
    """Run the task's original tests on a snapshot of ``ws`` in a fresh box; never raises for a bad verifier.

    ``grader_uid``: the user the verifier runs as (``"default"``: :func:`default_grader_uid`; None:
    this process's user). ``scratch`` must be a folder that user can enter (the system's temporary
    folder, the default, is)."""
    uid = default_grader_uid() if grader_uid == "default" else grader_uid
    assert uid is None or isinstance(uid, int)
    task = ws.task
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"harbor-grade-{task.id}-", dir=scratch) as tmp:
        fresh = snapshot(ws, Path(tmp) / "box")
        defuse_tree(fresh.dirs.app)
        shutil.rmtree(fresh.dirs.root / "tests")
        shutil.copytree(task.path / "tests", fresh.dirs.root / "tests")  # the original tests, never the agent's
        if uid is not None:  # another user grades: it must reach the folders and write only the reward
            for path in (Path(tmp), fresh.dirs.root, *(fresh.dirs.root / "tests").rglob("*"),
                         fresh.dirs.root / "tests"):
                mode = path.stat().st_mode
                path.chmod(mode | (0o555 if path.is_dir() else 0o444))
            (fresh.dirs.root / "logs" / "verifier").chmod(0o777)
        # no module the agent planted in the cwd (/app) or a user site may shadow the verifier's imports
        env = {**fresh.env, "PYTHONSAFEPATH": "1", "PYTHONNOUSERSITE": "1", **forced_env()}
        result = box_run(fresh.dirs, ["bash", "/tests/test.sh"], fresh.workdir, env, task.verifier_timeout_s,
                         uid=uid, hide=hidden_paths(task), task=task)
        reward, components, why = read_reward(fresh.dirs.root / "logs" / "verifier")
    if result.timed_out:
        why = f"the verifier ran past [verifier] timeout_sec={task.verifier_timeout_s:g}" + (f"; {why}" if why
                                                                                           else "")
        reward = None
    if reward is None:
        return Grade(0.0, {}, f"task {task.id!r}: reward 0 (fail closed): {why}", result.status, result.output,
                     time.monotonic() - start, uid)
    return Grade(reward, components, "", result.status, result.output, time.monotonic() - start, uid)


def run_oracle(task: HarborTask, scratch: Path | None = None, grader_uid: int | str | None = "default",
               workspace: Workspace | None = None) -> tuple[Grade, BoxResult]:
    """Set the task up, run ``solution/solve.sh`` as the agent would, grade; (grade, solve.sh's result)."""
    with tempfile.TemporaryDirectory(prefix=f"harbor-oracle-{task.id}-", dir=scratch) as tmp:
        ws = workspace or prepare(task, Path(tmp) / "box")
        shutil.copytree(task.path / "solution", ws.dirs.root / "solution", dirs_exist_ok=True)
        solved = box_run(ws.dirs, ["bash", "/solution/solve.sh"], ws.workdir, ws.env, task.agent_timeout_s,
                         hide=hidden_paths(task), task=task, network=task.allow_internet)
        return grade(ws, scratch, grader_uid), solved


def run_noop(task: HarborTask, scratch: Path | None = None, grader_uid: int | str | None = "default") -> Grade:
    """Set the task up and grade it untouched (a no-op agent)."""
    with tempfile.TemporaryDirectory(prefix=f"harbor-noop-{task.id}-", dir=scratch) as tmp:
        return grade(prepare(task, Path(tmp) / "box"), scratch, grader_uid)
