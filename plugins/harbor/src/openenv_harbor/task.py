"""Harbor task folders: read, checked, and gathered into a suite (python3 stdlib only).

A task is a folder holding ``task.toml``, ``instruction.md``, ``environment/Dockerfile``,
``tests/test.sh`` and ``solution/solve.sh`` (/work/briefs' Harbor contract; Harbor's own layout).
``load_task`` raises :class:`HarborTaskError` naming the task and the file; ``load_suite`` reads a
task folder or a folder of them and keeps going past broken tasks (their errors are listed).

This module and :mod:`openenv_harbor.box` import nothing outside the standard library so that
``suites/terminal/check.py`` can run them with a bare ``python3``.
"""

from __future__ import annotations

import difflib
import json
import shlex
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["ALLOWED_INSTRUCTIONS", "DEFAULT_SPLIT", "REQUIRED_FILES", "HarborTask", "HarborTaskError", "Step",
           "Suite", "find_tasks", "load_suite", "load_task", "parse_dockerfile"]

#: Dockerfile instructions a *local* task may use; anything else needs the Docker runtime.
ALLOWED_INSTRUCTIONS = ("FROM", "WORKDIR", "COPY", "ENV", "LABEL", "RUN")
REQUIRED_FILES = ("task.toml", "instruction.md", "environment/Dockerfile", "tests/test.sh", "solution/solve.sh")
#: The split of a task whose ``[metadata] split`` does not say (every task is an evaluation task).
DEFAULT_SPLIT = "test"
DEFAULT_BUILD_TIMEOUT_S = 120.0
DEFAULT_AGENT_TIMEOUT_S = 600.0
DEFAULT_VERIFIER_TIMEOUT_S = 600.0


class HarborTaskError(Exception):
    """A task folder that cannot be used: the message names the task, the file and the fix."""

    def __init__(self, message: str, *, task: str | None = None, file: str | None = None) -> None:
        super().__init__(message)
        self.task, self.file = task, file


@dataclass(frozen=True)
class Step:
    """One Dockerfile instruction the local runtime executes (WORKDIR, COPY, ENV or RUN)."""

    kind: str
    args: tuple[str, ...]
    line: int


@dataclass(frozen=True)
class HarborTask:
    """A Harbor task folder, read and checked for the files the format requires."""

    path: Path
    id: str
    config: dict[str, object]
    instruction: str
    steps: tuple[Step, ...]
    #: Why the local runtime cannot set this task up (a Dockerfile instruction it does not run); "" if it can.
    local_blocker: str
    agent_timeout_s: float
    verifier_timeout_s: float
    build_timeout_s: float
    cpus: float | None
    memory_mb: int | None
    allow_internet: bool
    split: str

    @property
    def metadata(self) -> dict[str, object]:
        return _section(self.config, "metadata")

    @property
    def dockerfile(self) -> Path:
        return self.path / "environment" / "Dockerfile"


@dataclass
class Suite:
    """The tasks of a folder that loaded, and an error per task folder that did not."""

    root: Path
    tasks: list[HarborTask] = field(default_factory=list)
    errors: dict[str, HarborTaskError] = field(default_factory=dict)

    def get(self, task_id: str) -> HarborTask:
        for task in self.tasks:
            if task.id == task_id:
                return task
        if task_id in self.errors:
            raise self.errors[task_id]
        close = difflib.get_close_matches(task_id, [t.id for t in self.tasks], 1)
        raise HarborTaskError(f"no task {task_id!r} in {self.root}" + (f" (did you mean {close[0]!r}?)" if close
                                                                       else ""), task=task_id)


def _section(config: dict[str, object], name: str) -> dict[str, object]:
    value = config.get(name, {})
    return value if isinstance(value, dict) else {}


def _number(config: dict[str, object], section: str, key: str, default: float | None, where: Path,
            task: str, unit: str = "seconds") -> float | None:
    value = _section(config, section).get(key, default)
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
        raise HarborTaskError(f"task {task!r}: {where}: [{section}] {key} must be a positive number of {unit}, "
                              f"not {value!r}", task=task, file=str(where))
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


def parse_dockerfile(path: Path, task: str | None = None) -> tuple[tuple[Step, ...], str]:
    """The WORKDIR/COPY/ENV/RUN steps of a Dockerfile and why the local runtime cannot run it ("" if it can).

    An instruction outside :data:`ALLOWED_INSTRUCTIONS` does not make the file invalid (the Docker
    runtime builds it); it makes the task Docker-only, and the blocker names the line."""
    task = task or path.parent.parent.name
    steps: list[Step] = []
    blocker = ""
    for number, line in _logical_lines(path.read_text(encoding="utf-8")):
        keyword, _, rest = line.partition(" ")
        keyword, rest = keyword.upper(), rest.strip()
        if keyword not in ALLOWED_INSTRUCTIONS:
            blocker = blocker or (f"task {task!r}: {path}:{number}: {keyword} is not allowed in a local task's "
                                  f"Dockerfile (use only {', '.join(ALLOWED_INSTRUCTIONS)}; do the work in a RUN "
                                  "script instead, or use the Docker runtime)")
            continue
        if keyword in {"FROM", "LABEL"}:
            continue
        if keyword == "RUN":
            if rest.startswith("["):
                try:
                    argv = json.loads(rest)
                except json.JSONDecodeError as exc:
                    raise HarborTaskError(f"task {task!r}: {path}:{number}: RUN's exec form is not a JSON list "
                                          f"({exc})", task=task, file=str(path)) from None
                steps.append(Step("RUN", tuple(str(a) for a in argv), number))
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
                        raise HarborTaskError(f"task {task!r}: {path}:{number}: ENV {part!r} has no '=' "
                                              "(write ENV KEY=value)", task=task, file=str(path))
                    steps.append(Step("ENV", (key, value), number))
        elif keyword == "WORKDIR":
            steps.append(Step("WORKDIR", (rest,), number))
        else:  # COPY
            parts = [p for p in shlex.split(rest) if not p.startswith("--")]
            if len(parts) < 2:
                raise HarborTaskError(f"task {task!r}: {path}:{number}: COPY needs a source and a destination",
                                      task=task, file=str(path))
            steps.append(Step("COPY", tuple(parts), number))
    return tuple(steps), blocker


def load_task(path: str | Path) -> HarborTask:
    """Read a task folder; raises :class:`HarborTaskError` naming the task and the missing or malformed file."""
    path = Path(path)
    name = path.name
    for rel in REQUIRED_FILES:
        if not (path / rel).is_file():
            raise HarborTaskError(f"task {name!r}: {path / rel}: missing (a Harbor task needs "
                                  f"{', '.join(REQUIRED_FILES)})", task=name, file=str(path / rel))
    toml = path / "task.toml"
    try:
        config = tomllib.loads(toml.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise HarborTaskError(f"task {name!r}: {toml}: not valid TOML ({exc}); fix the file (see "
                              "docs/harbor.md for the keys)", task=name, file=str(toml)) from None
    for section in ("metadata", "verifier", "agent", "environment"):
        if section in config and not isinstance(config[section], dict):
            raise HarborTaskError(f"task {name!r}: {toml}: {section} must be a table ([{section}]), "
                                  f"not {config[section]!r}", task=name, file=str(toml))
    instruction = (path / "instruction.md").read_text(encoding="utf-8")
    if not instruction.strip():
        raise HarborTaskError(f"task {name!r}: {path / 'instruction.md'}: empty (write the prompt the agent sees)",
                              task=name, file=str(path / "instruction.md"))
    steps, blocker = parse_dockerfile(path / "environment" / "Dockerfile", name)
    env = _section(config, "environment")
    internet = env.get("allow_internet", False)
    if not isinstance(internet, bool):
        raise HarborTaskError(f"task {name!r}: {toml}: [environment] allow_internet must be true or false, "
                              f"not {internet!r}", task=name, file=str(toml))
    split = _section(config, "metadata").get("split", DEFAULT_SPLIT)
    if not isinstance(split, str) or not split:
        raise HarborTaskError(f"task {name!r}: {toml}: [metadata] split must be a split name such as "
                              f"\"train\" or \"test\", not {split!r}", task=name, file=str(toml))
    memory = _number(config, "environment", "memory_mb", None, toml, name, "MiB")
    agent_t = _number(config, "agent", "timeout_sec", DEFAULT_AGENT_TIMEOUT_S, toml, name)
    verifier_t = _number(config, "verifier", "timeout_sec", DEFAULT_VERIFIER_TIMEOUT_S, toml, name)
    build_t = _number(config, "environment", "build_timeout_sec", DEFAULT_BUILD_TIMEOUT_S, toml, name)
    assert agent_t is not None and verifier_t is not None and build_t is not None
    return HarborTask(path=path, id=name, config=config, instruction=instruction, steps=steps,
                      local_blocker=blocker, agent_timeout_s=agent_t, verifier_timeout_s=verifier_t,
                      build_timeout_s=build_t, cpus=_number(config, "environment", "cpus", None, toml, name, "CPUs"),
                      memory_mb=int(memory) if memory is not None else None, allow_internet=internet, split=split)


def find_tasks(suite: str | Path, names: Sequence[str] = ()) -> list[Path]:
    """Task folders of a suite (a task folder itself, or the folders holding a task.toml), or the named ones."""
    suite = Path(suite)
    if (suite / "task.toml").is_file():
        every = [suite]
    else:
        # a folder with any of the task files counts, so a task missing task.toml is reported, not skipped
        every = sorted(p for p in suite.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))
                       and any((p / rel).exists() for rel in REQUIRED_FILES)) if suite.is_dir() else []
    if not names:
        return every
    known = {p.name: p for p in every}
    missing = [n for n in names if n not in known]
    if missing:
        hints = [f"{n!r}" + (f" (did you mean {close[0]!r}?)" if (close := difflib.get_close_matches(n, known, 1))
                             else "") for n in missing]
        raise HarborTaskError(f"no such task in {suite}: {', '.join(hints)}")
    return [known[n] for n in names]


def load_suite(path: str | Path, names: Sequence[str] = ()) -> Suite:
    """Every task of a folder (or the one task it is); broken tasks go to ``errors``, the rest load."""
    root = Path(path)
    if not root.is_dir():
        raise HarborTaskError(f"{root}: not a folder (give a Harbor task folder or a folder of them)")
    suite = Suite(root=root)
    for folder in find_tasks(root, names):
        try:
            suite.tasks.append(load_task(folder))
        except HarborTaskError as exc:
            suite.errors[folder.name] = exc
    if not suite.tasks and not suite.errors:
        raise HarborTaskError(f"{root}: no Harbor tasks here (a task folder holds {', '.join(REQUIRED_FILES)})")
    return suite
