"""``generate_suite``: projects -> baseline under coverage -> mutations tried on their covering tests -> tasks."""

from __future__ import annotations

import json
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from openenv_harbor.swegen.mutate import Mutation, candidates, shuffled
from openenv_harbor.swegen.select import Baseline, Layout, baseline, layout_of, run_tests
from openenv_harbor.swegen.sources import Project, SweGenError, fetch
from openenv_harbor.swegen.write import Kept, vendor_pytest, write_task

__all__ = ["ProjectStats", "Summary", "generate_suite", "try_mutation"]

#: A mutation's covering tests must fail within this many seconds (else it is dropped as a hang).
TRIAL_TIMEOUT_S = 60.0
#: At most this many tasks from one function (so a suite is not one function's variants).
PER_FUNCTION = 2


@dataclass
class ProjectStats:
    project: str
    split: str
    candidates: int = 0
    tried: int = 0
    kept: int = 0
    timed_out: int = 0
    seconds: float = 0.0
    tasks: list[str] = field(default_factory=list)


@dataclass
class Summary:
    out: str
    projects: list[ProjectStats]
    seconds: float

    @property
    def tried(self) -> int:
        return sum(p.tried for p in self.projects)

    @property
    def kept(self) -> int:
        return sum(p.kept for p in self.projects)

    @property
    def yield_(self) -> float:
        return self.kept / self.tried if self.tried else 0.0

    @property
    def per_minute(self) -> float:
        return self.kept / (self.seconds / 60) if self.seconds else 0.0

    def to_dict(self) -> dict[str, object]:
        return {"out": self.out, "tried": self.tried, "kept": self.kept, "yield": round(self.yield_, 3),
                "tasks_per_minute": round(self.per_minute, 2), "seconds": round(self.seconds, 1),
                "projects": [asdict(p) for p in self.projects]}


def _covering(base: Baseline, m: Mutation) -> list[str]:
    lines = base.covering.get(m.file, {})
    passed = set(base.passed)
    tests: set[str] = set()
    for line in range(m.line, m.end_line + 1):
        tests |= lines.get(line, set())
    return sorted(tests & passed)


def try_mutation(work: Path, layout: Layout, base: Baseline, m: Mutation, timeout_s: float = TRIAL_TIMEOUT_S
                 ) -> tuple[list[str], dict[str, str]] | None:
    """Apply ``m`` in ``work`` (a copy of the tree), run its covering tests, restore; (failing, messages)
    when it makes some but not every covering test fail (every one is allowed for one or two), else None."""
    covering = _covering(base, m)
    if not covering:
        return None
    target = work / m.file
    original = target.read_bytes()
    target.write_bytes(m.apply(original))
    try:
        trial = run_tests(work, layout, covering, timeout_s)
    finally:
        target.write_bytes(original)
    if trial.timed_out or not trial.outcomes:
        return None
    failing = [t for t in covering if trial.outcomes.get(t) != "passed"]
    if not failing or (len(failing) == len(covering) and len(covering) > 2):
        return None
    return failing, {t: trial.messages.get(t, "") for t in failing}


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def _project_tasks(project: Project, split: str, out: Path, cache: Path | None, max_tasks: int, seed: int,
                   jobs: int, pytest_zip: Path, log: Callable[[str], None]) -> ProjectStats:
    start = time.monotonic()
    stats = ProjectStats(project.spec, split)
    layout = layout_of(project, fetch(project, cache))
    base = baseline(project, layout)
    pool_of: list[Mutation] = []
    for rel in layout.modules():
        try:
            pool_of += candidates(rel, (layout.tree / rel).read_bytes(), lambda m: bool(_covering(base, m)))
        except (SyntaxError, UnicodeDecodeError):
            continue
    order = shuffled(pool_of, seed)
    stats.candidates = len(order)
    per_function: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="swegen-work-") as tmp:
        works = []
        for index in range(max(1, jobs)):
            works.append(Path(tmp) / f"w{index}")
            shutil.copytree(layout.tree, works[-1], symlinks=True)
        with ThreadPoolExecutor(max_workers=len(works)) as pool:
            position = 0
            while stats.kept < max_tasks and position < len(order):
                batch: list[Mutation] = []
                while len(batch) < len(works) and position < len(order):
                    m = order[position]
                    position += 1
                    if per_function.get(f"{m.file}:{m.function}", 0) < PER_FUNCTION:
                        batch.append(m)
                results = list(pool.map(lambda pair: try_mutation(pair[0], layout, base, pair[1]),
                                        zip(works, batch, strict=False)))
                stats.tried += len(batch)
                for m, result in zip(batch, results, strict=True):
                    key = f"{m.file}:{m.function}"
                    if result is None or stats.kept >= max_tasks or per_function.get(key, 0) >= PER_FUNCTION:
                        continue
                    failing, messages = result
                    files = {t.split("::")[0] for t in failing}
                    p2p = tuple(t for t in base.passed if t.split("::")[0] in files and t not in failing)
                    kept = Kept(project, layout, m, tuple(failing), p2p, messages)
                    task_id = f"{_slug(project.name)}-{stats.kept + 1:03d}"
                    write_task(out, task_id, kept, split, pytest_zip)
                    per_function[key] = per_function.get(key, 0) + 1
                    stats.kept += 1
                    stats.tasks.append(task_id)
                    log(f"{task_id}: {m.operator} in {m.file}:{m.function} line {m.line}; "
                        f"{len(failing)} failing, {len(p2p)} passing")
    stats.seconds = time.monotonic() - start
    return stats


def generate_suite(projects: Sequence[Project], out: Path, *, max_per_project: int = 30, seed: int = 0,
                   jobs: int = 2, cache: Path | None = None, test_projects: Sequence[str] = (),
                   log: Callable[[str], None] = lambda _: None) -> Summary:
    """Write the tasks of every project into ``out`` (one split per project) and ``out/index.json``."""
    if not projects:
        raise SweGenError("no projects given: name at least one as NAME==VERSION")
    if max_per_project < 1:
        raise SweGenError(f"--max-per-project must be at least 1, not {max_per_project}")
    if out.exists() and any(out.iterdir()) and not (out / "index.json").is_file():
        raise SweGenError(f"{out}: not empty and not a generated suite (give a new folder with --out)")
    start = time.monotonic()
    fresh = not out.exists()
    out.mkdir(parents=True, exist_ok=True)
    for stale in out.iterdir():  # a previous generation's tasks are replaced, not mixed in
        if stale.is_dir():
            shutil.rmtree(stale)
    stats = []
    try:
        pytest_zip = vendor_pytest(out / ".pytest.zip")
        for project in projects:
            split = (("test" if project.name in test_projects else "train") if test_projects
                     else project.split or "train")
            log(f"{project.spec} ({split}): downloading, running its tests under coverage")
            stats.append(_project_tasks(project, split, out, cache, max_per_project, seed, jobs, pytest_zip, log))
    except BaseException:
        if fresh:  # bad input leaves nothing behind
            shutil.rmtree(out, ignore_errors=True)
        raise
    summary = Summary(str(out), stats, time.monotonic() - start)
    (out / "index.json").write_text(json.dumps(summary.to_dict(), indent=1) + "\n")
    return summary
