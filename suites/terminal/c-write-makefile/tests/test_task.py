"""Verifier of c-write-makefile: the agent's Makefile, on the original sources, builds, is
incremental per header and per source, and cleans."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

makefile = Path("/app/calc/Makefile")
if not makefile.is_file():
    sys.exit("FAIL: /app/calc/Makefile is missing")
work = Path(tempfile.mkdtemp()) / "calc"
shutil.copytree("/tests/pristine", work)
shutil.copy(makefile, work / "Makefile")
OBJECTS = ["main", "lexer", "parser"]
clock = [1_700_000_000.0]


def make(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["make", *args], cwd=work, capture_output=True, text=True, timeout=120)


def fail(message: str, run: subprocess.CompletedProcess[str] | None = None) -> None:
    sys.exit(f"FAIL: {message}" + (f"\n{run.stdout}{run.stderr}" if run else ""))


def age_everything() -> None:
    """Every file an hour older each round, so a rebuild is visible in mtimes without sleeping."""
    clock[0] += 3600
    for path in work.rglob("*"):
        os.utime(path, (clock[0], clock[0]))


def touch(rel: str) -> None:
    os.utime(work / rel, (clock[0] + 1800, clock[0] + 1800))


def rebuilt(before: dict[str, float]) -> list[str]:
    return sorted(o for o in OBJECTS if (work / "build" / f"{o}.o").stat().st_mtime != before[o])


run = make()
if run.returncode or not (work / "bin" / "calc").is_file():
    fail("make did not build bin/calc", run)
missing = [o for o in OBJECTS if not (work / "build" / f"{o}.o").is_file()]
if missing:
    fail(f"make did not produce build/{missing[0]}.o")
calc = subprocess.run([str(work / "bin" / "calc")], input="2+3*4\n(7-1)/2\n-3*-(2+1)\n", capture_output=True,
                      text=True, timeout=30)
if calc.stdout.split() != ["14", "3", "9"]:
    fail(f"bin/calc printed {calc.stdout.split()} instead of ['14', '3', '9']")
if make("-q").returncode != 0:
    fail("a second make would do work although nothing changed (make -q did not exit 0)")
# which objects each change must rebuild (the #include lines of the pristine sources)
for changed, expected in [("include/lexer.h", ["lexer", "parser"]), ("include/parser.h", ["main", "parser"]),
                          ("src/main.c", ["main"]), ("src/lexer.c", ["lexer"])]:
    age_everything()
    before = {o: (work / "build" / f"{o}.o").stat().st_mtime for o in OBJECTS}
    calc_before = (work / "bin" / "calc").stat().st_mtime
    touch(changed)
    run = make()
    if run.returncode:
        fail(f"make failed after {changed} changed", run)
    if rebuilt(before) != expected:
        fail(f"after {changed} changed, make rebuilt {rebuilt(before)} instead of exactly {expected}", run)
    if (work / "bin" / "calc").stat().st_mtime == calc_before:
        fail(f"after {changed} changed, bin/calc was not relinked", run)
run = make("clean")
if run.returncode or (work / "build").exists() or (work / "bin").exists():
    fail("make clean did not remove build/ and bin/", run)
print("ok")
