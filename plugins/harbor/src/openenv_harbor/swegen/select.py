"""Which tests cover which lines (coverage.py, one context per test), and a mutation's failing tests."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from openenv_harbor.swegen.sources import Project, SweGenError

__all__ = ["Baseline", "Layout", "PYTEST_INI", "Trial", "baseline", "layout_of", "run_tests"]

RUNNER = Path(__file__).with_name("runner.py")
#: The pytest configuration every run uses (the project's own is ignored, in generation and grading alike).
PYTEST_INI = "[pytest]\n"
_SKIP_DIRS = {"tests", "test", "testing", "docs", "doc", "examples", "benchmarks", "build", "bench"}


@dataclass(frozen=True)
class Layout:
    """Where the importable code (``src``: ``.`` or ``src``) and the tests sit in a project's tree."""

    tree: Path
    src: str
    tests: tuple[str, ...]
    #: A single-module project's own module at the top of the tree (``parse.py``); other top-level
    #: files there are build scripts and are left out.
    top_modules: tuple[str, ...] = ()

    def modules(self) -> list[str]:
        """The project's own .py files (relative to the tree), tests and build scripts left out."""
        root = self.tree / self.src
        found = []
        for path in sorted(root.rglob("*.py")):
            rel = path.relative_to(self.tree).as_posix()
            parts = path.relative_to(root).parts
            if (len(parts) == 1 and root == self.tree and rel not in self.top_modules) or set(parts[:-1]) & _SKIP_DIRS:
                continue  # setup.py, versioneer.py, test_x.py at the top; test folders
            if any(rel == t or rel.startswith(t.rstrip("/") + "/") for t in self.tests):
                continue
            if path.name.startswith("test_") or path.name == "conftest.py":
                continue
            found.append(rel)
        return found


def layout_of(project: Project, tree: Path) -> Layout:
    src = "src" if (tree / "src").is_dir() else "."
    tests = project.tests or tuple(n for n in ("tests", "test", "testing") if (tree / n).is_dir()) or tuple(
        sorted(p.name for p in tree.glob("test_*.py")))
    missing = [t for t in tests if not (tree / t).exists()]
    if not tests or missing:
        what = ", ".join(missing) or "no tests/, test/ or test_*.py"
        raise SweGenError(f"project {project.spec}: its sdist has no tests ({what} in {tree}); pick a project "
                          "whose sdist ships its test suite")
    module = f"{project.name.lower().replace('-', '_')}.py"
    top = (module,) if src == "." and (tree / module).is_file() else ()
    return Layout(tree, src, tests, top)


@dataclass
class Trial:
    """One pytest run: each test's outcome and failure message (``timed_out``: no outcomes)."""

    outcomes: dict[str, str] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    contexts: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    timed_out: bool = False
    output: str = ""


def run_tests(work: Path, layout: Layout, args: list[str], timeout_s: float, coverage: bool = False) -> Trial:
    """Run the runner (this interpreter, its pytest) in ``work`` on ``args`` (node ids or test paths)."""
    with tempfile.TemporaryDirectory(prefix="swegen-run-") as tmp:
        ini, out = Path(tmp) / "pytest.ini", Path(tmp) / "result.json"
        ini.write_text(PYTEST_INI)
        argv = [sys.executable, "-P", str(RUNNER), "--out", str(out)]
        if coverage:
            argv += ["--coverage", str(work / layout.src)]
        argv += ["--", "-c", str(ini), f"--rootdir={work}", *args]
        env = {**os.environ, "PYTHONPATH": str(work / layout.src), "PYTHONDONTWRITEBYTECODE": "1",
               "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
        try:
            proc = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True, timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return Trial(timed_out=True)
        if not out.is_file():
            return Trial(output=(proc.stdout + proc.stderr)[-2000:])
        data = json.loads(out.read_text())
    return Trial(data["outcomes"], data["messages"], data.get("contexts", {}), output=proc.stdout[-2000:])


@dataclass
class Baseline:
    """The unmutated suite: the tests that passed and, per module line, the tests that ran it."""

    passed: list[str]
    covering: dict[str, dict[int, set[str]]]  # module (relative) -> line -> node ids


def baseline(project: Project, layout: Layout, timeout_s: float = 600.0) -> Baseline:
    """Run the whole suite once under coverage; raises SweGenError if a test fails or none runs."""
    with tempfile.TemporaryDirectory(prefix="swegen-base-") as tmp:
        work = Path(tmp) / "tree"
        shutil.copytree(layout.tree, work, symlinks=True)
        trial = run_tests(work, layout, list(layout.tests), timeout_s, coverage=True)
        if trial.timed_out:
            raise SweGenError(f"project {project.spec}: its tests ran past {timeout_s:g} s (pick a faster suite)")
        failed = sorted(t for t, o in trial.outcomes.items() if o == "failed")
        passed = sorted(t for t, o in trial.outcomes.items() if o == "passed")
        if failed or not passed:
            first = f"{failed[0]}: {trial.messages.get(failed[0], '')}" if failed else trial.output[-300:]
            first = " ".join(first.split())[:200]
            raise SweGenError(f"project {project.spec}: its own tests fail before any mutation "
                              f"({len(failed)} failed, {len(passed)} passed; {first}); pick another version or project")
        covering: dict[str, dict[int, set[str]]] = {}
        root = work.resolve()
        for path, lines in trial.contexts.items():
            try:
                rel = Path(path).resolve().relative_to(root).as_posix()
            except ValueError:
                continue
            covering[rel] = {int(line): set(tests) for line, tests in lines.items()}
    return Baseline(passed, covering)
