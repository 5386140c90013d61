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
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["BoxDirs", "Outcome", "Step", "Task", "TaskError", "check_suite", "check_task", "find_tasks",
           "load_task", "main", "parse_dockerfile"]

SUITE = Path(__file__).resolve().parent
#: The box's environment before the Dockerfile's ENV lines: HOME on the private /tmp so that no
#: ambient ~/.gitconfig (identity, aliases) of this machine can make a task pass here only.
BASE_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/tmp",
            "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TERM": "dumb"}
ALLOWED = ("FROM", "WORKDIR", "COPY", "ENV", "LABEL", "RUN")
MOUNTS = ("app", "tests", "logs", "solution")
#: How long the set-up RUN lines may take, unless task.toml's [environment] build_timeout_sec says.
DEFAULT_BUILD_TIMEOUT_S = 120.0


class TaskError(Exception):
    """A task folder that cannot be checked: says which file and what to fix."""


@dataclass(frozen=True)
class Step:
    """One Dockerfile instruction the local runtime executes."""

    kind: str  # WORKDIR, COPY, ENV or RUN
    args: tuple[str, ...]
    line: int


@dataclass(frozen=True)
class Task:
    """A Harbor task folder, read and checked for the files the contract requires."""

    path: Path
    id: str
    config: dict[str, object]
    steps: tuple[Step, ...]
    agent_timeout_s: float
    verifier_timeout_s: float
    build_timeout_s: float


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


def _section(config: dict[str, object], name: str) -> dict[str, object]:
    value = config.get(name, {})
    return value if isinstance(value, dict) else {}


def _seconds(config: dict[str, object], section: str, key: str, default: float, where: Path) -> float:
    value = _section(config, section).get(key, default)
    if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
        raise TaskError(f"{where}: [{section}] {key} must be a positive number of seconds, not {value!r}")
    return float(value)


def _logical_lines(text: str) -> Iterable[tuple[int, str]]:
    """Dockerfile lines with comments dropped and backslash continuations joined."""
    buffer, start = "", 0
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not buffer and (not stripped or stripped.startswith("#")):
            continue
        if buffer and stripped.startswith("#"):
            continue  # Docker drops comment lines inside a continuation too
        if not buffer:
            start = number
        if stripped.endswith("\\"):
            buffer += stripped[:-1] + " "
            continue
        yield start, buffer + stripped
        buffer = ""
    if buffer:
        yield start, buffer.strip()


def parse_dockerfile(path: Path) -> tuple[Step, ...]:
    """The WORKDIR/COPY/ENV/RUN steps of a local task's Dockerfile (FROM and LABEL are kept out)."""
    steps: list[Step] = []
    for number, line in _logical_lines(path.read_text(encoding="utf-8")):
        keyword, _, rest = line.partition(" ")
        keyword, rest = keyword.upper(), rest.strip()
        if keyword not in ALLOWED:
            raise TaskError(f"{path}:{number}: {keyword} is not allowed in a local task's Dockerfile "
                            f"(use only {', '.join(ALLOWED)}; do the work in a RUN script instead)")
        if keyword in {"FROM", "LABEL"}:
            continue
        if keyword == "RUN":
            if rest.startswith("["):
                steps.append(Step("RUN", tuple(json.loads(rest)), number))
            else:
                steps.append(Step("RUN", ("/bin/sh", "-c", rest), number))  # shell form, as Docker runs it
        elif keyword == "ENV":
            parts = shlex.split(rest)
            if parts and "=" not in parts[0]:  # legacy form: ENV KEY value with spaces
                steps.append(Step("ENV", (parts[0], rest[len(parts[0]):].strip()), number))
            else:
                for part in parts:
                    key, eq, value = part.partition("=")
                    if not eq:
                        raise TaskError(f"{path}:{number}: ENV {part!r} has no '=' (write ENV KEY=value)")
                    steps.append(Step("ENV", (key, value), number))
        elif keyword == "WORKDIR":
            steps.append(Step("WORKDIR", (rest,), number))
        else:  # COPY
            parts = [p for p in shlex.split(rest) if not p.startswith("--")]
            if len(parts) < 2:
                raise TaskError(f"{path}:{number}: COPY needs a source and a destination")
            steps.append(Step("COPY", tuple(parts), number))
    return tuple(steps)


def load_task(path: Path) -> Task:
    """Read a task folder; raises :class:`TaskError` naming the missing or malformed file."""
    for rel in ("task.toml", "instruction.md", "environment/Dockerfile", "tests/test.sh", "solution/solve.sh"):
        if not (path / rel).is_file():
            raise TaskError(f"{path / rel}: missing (a Harbor task needs task.toml, instruction.md, "
                            "environment/Dockerfile, tests/test.sh and solution/solve.sh)")
    try:
        config = tomllib.loads((path / "task.toml").read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise TaskError(f"{path / 'task.toml'}: not valid TOML ({exc})") from None
    toml = path / "task.toml"
    return Task(path=path, id=path.name, config=config, steps=parse_dockerfile(path / "environment" / "Dockerfile"),
                agent_timeout_s=_seconds(config, "agent", "timeout_sec", 600, toml),
                verifier_timeout_s=_seconds(config, "verifier", "timeout_sec", 600, toml),
                build_timeout_s=_seconds(config, "environment", "build_timeout_sec", DEFAULT_BUILD_TIMEOUT_S, toml))


def find_tasks(suite: Path, names: Sequence[str] = ()) -> list[Path]:
    """Task folders of a suite (those holding a task.toml), or the named ones."""
    every = sorted(p.parent for p in suite.glob("*/task.toml"))
    if not names:
        return every
    known = {p.name: p for p in every}
    missing = [n for n in names if n not in known]
    if missing:
        import difflib

        hints = [f"{n!r}" + (f" (did you mean {close[0]!r}?)" if (close := difflib.get_close_matches(n, known, 1))
                             else "") for n in missing]
        raise TaskError(f"no such task in {suite}: {', '.join(hints)}")
    return [known[n] for n in names]


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


def _box(dirs: BoxDirs, argv: Sequence[str], cwd: str, env: dict[str, str], timeout_s: float,
         uid: int | None = None) -> tuple[int, str]:
    """Run argv in a bubblewrap box (no network, own pid namespace); (exit status, output tail).

    With ``uid``, the box runs as that user (setpriv drops root first; bwrap then needs its own user
    namespace). Status 124 means the time limit was hit; the whole box is killed with it."""
    cmd = ["bwrap", *_root_binds()]
    if uid is not None:
        cmd = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "bwrap", "--unshare-user",
               *_root_binds()]
    for name in MOUNTS:
        cmd += ["--bind", str(dirs.root / name), f"/{name}"]
    cmd += ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--dev", "/dev", "--proc", "/proc",
            "--tmpfs", "/tmp", "--remount-ro", "/", "--die-with-parent", "--chdir", cwd, "--", *argv]
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=env, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout_s)
        status = proc.returncode
    except subprocess.TimeoutExpired:
        # bwrap is the box's pid 1 parent: killing its group ends every process inside.
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        status = 124
    return status, out.decode("utf-8", "replace")[-4000:]


def _copy_into(src: Path, dest: Path) -> None:
    if src.is_dir():
        shutil.copytree(src, dest, symlinks=True, dirs_exist_ok=True)
    else:
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest)


def _host_path(dirs: BoxDirs, box_path: str, task: Task, line: int) -> Path:
    rel = os.path.normpath(box_path).lstrip("/")
    top, _, rest = rel.partition("/")
    if top != "app":
        raise TaskError(f"{task.path}/environment/Dockerfile:{line}: {box_path} is outside /app (a local task "
                        "may only write its workspace /app at set-up)")
    return dirs.root / "app" / rest


def setup(task: Task, dirs: BoxDirs) -> tuple[str, dict[str, str]]:
    """Materialise /app in dirs from the Dockerfile; returns the final WORKDIR and environment."""
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
            dest_abs = os.path.join(workdir, dest)
            target = _host_path(dirs, dest_abs, task, step.line)
            for source in sources:
                matches = sorted(context.glob(source)) if any(c in source for c in "*?[") else [context / source]
                for match in matches:
                    inside = match.resolve() == context.resolve() or context.resolve() in match.resolve().parents
                    if not match.exists() or not inside:
                        raise TaskError(f"{task.path}/environment/Dockerfile:{step.line}: COPY source {source!r} "
                                        "is not a file or folder inside environment/")
                    into_dir = dest.endswith("/") or len(matches) > 1 or len(sources) > 1
                    if match.is_file() and into_dir:
                        _copy_into(match, target / match.name)
                    else:
                        _copy_into(match, target)
        else:  # RUN
            status, out = _box(dirs, step.args, workdir, env, task.build_timeout_s)
            if status != 0:
                raise TaskError(f"{task.path}/environment/Dockerfile:{step.line}: RUN exited {status}"
                                + (" (build_timeout_sec hit)" if status == 124 else "") + f":\n{out}")
    return workdir, env


def _reward(dirs: BoxDirs) -> tuple[float | None, str]:
    """The verifier's reward (reward.txt, else reward.json's ``reward``), or None and why not."""
    folder = dirs.root / "logs" / "verifier"
    txt, js = folder / "reward.txt", folder / "reward.json"
    if txt.is_file() and js.is_file():
        return None, "both reward.txt and reward.json were written"
    try:
        if txt.is_file():
            value = float(txt.read_text(encoding="utf-8").strip())
        elif js.is_file():
            value = json.loads(js.read_text(encoding="utf-8"))["reward"]
        else:
            return None, "the verifier wrote no /logs/verifier/reward.txt or reward.json"
    except (ValueError, KeyError, TypeError) as exc:
        return None, f"unreadable reward ({exc})"
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
        return None, f"reward {value!r} is not a number in [0, 1]"
    return float(value), ""


def _verify(task: Task, dirs: BoxDirs, workdir: str, env: dict[str, str], outcome: Outcome, label: str,
            uid: int | None = None) -> float | None:
    shutil.rmtree(dirs.root / "tests")
    shutil.copytree(task.path / "tests", dirs.root / "tests")  # the original tests, never the agent's
    # grading starts with an empty /logs/verifier: nothing the agent left there counts
    shutil.rmtree(dirs.root / "logs" / "verifier")
    (dirs.root / "logs" / "verifier").mkdir()
    if uid is not None:  # another user grades: it must reach the folders and write only the reward
        for folder in (dirs.root.parent, dirs.root, dirs.root / "tests", *(dirs.root / "tests").rglob("*")):
            folder.chmod(folder.stat().st_mode | 0o555 if folder.is_dir() else folder.stat().st_mode | 0o444)
        (dirs.root / "logs" / "verifier").chmod(0o777)
    status, out = _box(dirs, ["bash", "/tests/test.sh"], workdir, env, task.verifier_timeout_s, uid)
    outcome.log.append(f"[{label} verifier, exit {status}]\n{out}")
    if status == 124:
        outcome.errors.append(f"{label}: the verifier ran past [verifier] timeout_sec={task.verifier_timeout_s:g}")
    reward, why = _reward(dirs)
    if reward is None:
        outcome.errors.append(f"{label}: {why}")
    return reward


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
            built = BoxDirs(Path(tmp) / "built").make()
            workdir, env = setup(task, built)
            oracle, noop = BoxDirs(Path(tmp) / "oracle"), BoxDirs(Path(tmp) / "noop")
            for dirs in (oracle, noop):
                shutil.copytree(built.root, dirs.root, symlinks=True)
            shutil.copytree(task.path / "solution", oracle.root / "solution", dirs_exist_ok=True)
            status, out = _box(oracle, ["bash", "/solution/solve.sh"], workdir, env, task.agent_timeout_s)
            outcome.log.append(f"[oracle solve.sh, exit {status}]\n{out}")
            if status != 0:
                outcome.errors.append(f"oracle: solution/solve.sh exited {status}"
                                      + (" ([agent] timeout_sec hit)" if status == 124 else ""))
            hollow = BoxDirs(Path(tmp) / "hollow")
            shutil.copytree(oracle.root, hollow.root, symlinks=True)
            _empty_changed_files(built.root / "app", hollow.root / "app")
            outcome.oracle_reward = _verify(task, oracle, workdir, env, outcome, "oracle", grader_uid)
            outcome.noop_reward = _verify(task, noop, workdir, env, outcome, "no-op", grader_uid)
            outcome.hollow_reward = _verify(task, hollow, workdir, env, outcome, "hollow", grader_uid)
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
