"""Harbor task folders for kept mutations: the repo at the bugged state, hidden tests, the oracle.

Grading runs the box's ``python3 -S`` with a pytest vendored as one zip of compiled modules
(``pytest.zip``, built once per generation from the generator's pytest and hard-linked into every
task), on a copy of ``/app`` whose tests are the task's originals (every ``conftest.py`` the agent
planted is removed). The same zip sits at ``/app/.swegen/pytest.zip`` for the agent.
"""

from __future__ import annotations

import json
import os
import py_compile
import shlex
import shutil
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from openenv_harbor.swegen.mutate import Mutation
from openenv_harbor.swegen.select import PYTEST_INI, RUNNER, Layout
from openenv_harbor.swegen.sources import Project

__all__ = ["Kept", "issue_text", "vendor_pytest", "write_task"]

_VENDORED = ("pytest", "_pytest", "pluggy", "iniconfig", "packaging", "py.py", "pygments")
_PYGMENTS_KEEP = ("filters/__init__.py", "lexers/__init__.py", "lexers/_mapping.py", "lexers/diff.py",
                  "lexers/python.py", "styles/__init__.py", "styles/_mapping.py", "styles/default.py",
                  "formatters/__init__.py", "formatters/_mapping.py", "formatters/terminal.py",
                  "formatters/terminal256.py")
LISTED_TESTS = 10


@dataclass(frozen=True)
class Kept:
    """A mutation that makes ``fail_to_pass`` fail while ``pass_to_pass`` still pass."""

    project: Project
    layout: Layout
    mutation: Mutation
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    messages: dict[str, str]


def vendor_pytest(dest: Path) -> Path:
    """A zip of this interpreter's pytest (and its dependencies) as compiled modules, importable with -S."""
    import pytest

    site = Path(pytest.__file__).resolve().parent.parent
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf, tempfile.TemporaryDirectory() as tmp:
        for name in _VENDORED:
            top = site / name
            files = [top] if top.is_file() else sorted(top.rglob("*.py"))
            for path in files:
                rel = path.relative_to(site).as_posix()
                if name == "pygments" and path.parent != top and path.relative_to(top).as_posix() not in \
                        _PYGMENTS_KEEP:
                    continue
                compiled = Path(tmp) / (rel + "c")
                py_compile.compile(str(path), cfile=str(compiled), doraise=True,
                                   invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
                zf.write(compiled, rel + "c")
    return dest


def _link(src: Path, dest: Path) -> None:
    try:
        os.link(src, dest)
    except OSError:
        shutil.copy2(src, dest)


def issue_text(kept: Kept) -> str:
    """The issue: the failing tests and their assertion output; never the diff or the changed line."""
    m = kept.mutation
    original = (kept.layout.tree / m.file).read_bytes()
    changed = (original.decode("utf-8", "replace").splitlines()[m.line - 1:m.end_line]
               + m.apply(original).decode("utf-8", "replace").splitlines()[m.line - 1:m.end_line])
    banned = {line.strip() for line in changed if len(line.strip()) > 3}
    lines = [f"# {kept.project.name}: {len(kept.fail_to_pass)} test(s) fail", "",
             f"The repository in `/app` is {kept.project.name} {kept.project.version}. After a recent change "
             "these tests of its own suite fail:", ""]
    for test in kept.fail_to_pass[:LISTED_TESTS]:
        message = " ".join(kept.messages.get(test, "").split())
        if any(b in message for b in banned):
            message = ""  # never the changed source line
        lines.append(f"- `{test}`" + (f": `{message[:300]}`" if message else ""))
    if len(kept.fail_to_pass) > LISTED_TESTS:
        lines.append(f"- ... and {len(kept.fail_to_pass) - LISTED_TESTS} more in the same files")
    files = sorted({t.split("::")[0] for t in kept.fail_to_pass})
    src = "/app" if kept.layout.src == "." else f"/app/{kept.layout.src}"
    lines += ["", "Fix the library's code so that they pass, without changing the tests; the rest of the "
              "suite must keep passing. The tests run with the box's Python and the pytest in `/app/.swegen`:",
              "", "```", f"cd /app && PYTHONPATH=/app/.swegen/pytest.zip:{src} python3 -S -m pytest "
              f"-c .swegen/pytest.ini --rootdir=/app {' '.join(shlex.quote(f) for f in files)}", "```", ""]
    return "\n".join(lines)


def _toml_str(value: str) -> str:
    return json.dumps(value)


def write_task(root: Path, task_id: str, kept: Kept, split: str, pytest_zip: Path) -> Path:
    """Write one Harbor task folder ``root/task_id``; returns it."""
    task = root / task_id
    if task.exists():
        shutil.rmtree(task)
    layout, m = kept.layout, kept.mutation
    app = task / "environment" / "app"
    shutil.copytree(layout.tree, app, symlinks=True, ignore=shutil.ignore_patterns(
        ".openenv-complete", "__pycache__", "*.pyc", ".git"))
    original = (layout.tree / m.file).read_bytes()
    (app / m.file).write_bytes(m.apply(original))
    (app / ".swegen").mkdir()
    _link(pytest_zip, app / ".swegen" / "pytest.zip")
    (app / ".swegen" / "pytest.ini").write_text(PYTEST_INI)
    (task / "environment" / "Dockerfile").write_text(
        "FROM openenv-harbor-base\nWORKDIR /app\nCOPY app/ /app/\n"
        "RUN git init -q && echo .swegen/ >> .git/info/exclude && git add -A && "
        "git -c user.name=swegen -c user.email=swegen@openenv.invalid commit -qm init\n")
    tests = task / "tests"
    (tests / "orig").mkdir(parents=True)
    for rel in (*layout.tests, *(["conftest.py"] if (layout.tree / "conftest.py").is_file() else [])):
        src, dest = layout.tree / rel, tests / "orig" / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        if src.is_dir():
            shutil.copytree(src, dest, symlinks=True, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(src, dest)
    shutil.copy2(RUNNER, tests / "runner.py")
    _link(pytest_zip, tests / "pytest.zip")
    (tests / "pytest.ini").write_text(PYTEST_INI)
    (tests / "expected.json").write_text(json.dumps({"fail_to_pass": list(kept.fail_to_pass),
                                                     "pass_to_pass": list(kept.pass_to_pass)}, indent=1) + "\n")
    files = sorted({t.split("::")[0] for t in (*kept.fail_to_pass, *kept.pass_to_pass)})
    removed = " ".join(f'"$work"/{shlex.quote(t)}' for t in layout.tests)
    src_dir = '"$work"' if layout.src == "." else f'"$work"/{layout.src}'
    (tests / "test.sh").write_text(f"""#!/bin/bash
# Verifier: the listed tests (expected.json) on a copy of /app whose tests are the task's originals.
# Reward 1 only if every fail_to_pass and pass_to_pass test passes.
mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt
work=$(mktemp -d /tmp/swe.XXXXXX) || exit 0
cp -r /app/. "$work"/ && rm -rf "$work"/.git "$work"/.swegen || exit 0
find "$work" -name conftest.py -delete
rm -rf {removed}
cp -r /tests/orig/. "$work"/ || exit 0
cd "$work" || exit 0
PYTHONPATH=/tests/pytest.zip:{src_dir} PYTHONDONTWRITEBYTECODE=1 timeout 280 python3 -S -P /tests/runner.py \\
    --expect /tests/expected.json --reward /logs/verifier/reward.txt -- \\
    -c /tests/pytest.ini --rootdir="$work" {' '.join(shlex.quote(f) for f in files)}
""")
    (task / "solution" / "original").mkdir(parents=True)
    (task / "solution" / "original" / "module.py").write_bytes(original)
    (task / "solution" / "solve.sh").write_text(
        f"#!/bin/bash\n# Restores the function the mutation changed ({m.function} in {m.file}).\n"
        f"cp /solution/original/module.py /app/{shlex.quote(m.file)}\n")
    (task / "instruction.md").write_text(issue_text(kept))
    difficulty = "easy" if len(kept.fail_to_pass) > 5 else "medium" if len(kept.fail_to_pass) > 1 else "hard"
    (task / "task.toml").write_text(f"""version = "1.0"

[metadata]
difficulty = "{difficulty}"
category = "fixing a bug in a Python library"
tags = ["python", "swe", "generated", {_toml_str(kept.project.name)}, {_toml_str(m.operator)}]
split = {_toml_str(split)}
project = {_toml_str(kept.project.spec)}
mutation_operator = {_toml_str(m.operator)}
function = {_toml_str(f"{m.file}:{m.function}")}
fail_to_pass = {len(kept.fail_to_pass)}
pass_to_pass = {len(kept.pass_to_pass)}

[verifier]
timeout_sec = 300

[agent]
timeout_sec = 900

[environment]
build_timeout_sec = 60
cpus = 1
memory_mb = 2048
allow_internet = false
""")
    return task
