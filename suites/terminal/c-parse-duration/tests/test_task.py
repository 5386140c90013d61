"""Verifier of c-parse-duration: the agent's duration.c, compiled with a driver of our own, gives
the documented answer for every case."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CASES = {"90s": 90, "1h30m": 5400, "2d4s": 172804, "1d1h1m1s": 90061, "0s": 0, "007m": 420, "24h": 86400,
         "2147483647s": 2147483647, "2147483648s": -1, "24855d": 2147472000, "24856d": -1, "596523h": 2147482800,
         "": -1, "1x": -1,
         "m": -1, "5": -1, "1m1h": -1, "1h1h": -1, " 1h": -1, "1h ": -1, "-1s": -1, "+1s": -1, "1H": -1,
         "1h30": -1, "h30m": -1, "1d2h3m4s5s": -1, "99999999999999999999s": -1, "1.5h": -1, "1s1d": -1}

work = Path(tempfile.mkdtemp())
source = Path("/app/duration/duration.c")
if not source.is_file():
    sys.exit("FAIL: /app/duration/duration.c is missing")
shutil.copy(source, work / "duration.c")
shutil.copy("/tests/duration.h", work / "duration.h")  # the original header, not the agent's copy
lines = ['#include <stdio.h>', '#include "duration.h"', "int main(void) {"]
lines += [f'    printf("%ld\\n", parse_duration("{case}"));' for case in CASES]
lines += ['    printf("%ld\\n", parse_duration(NULL));', "    return 0;", "}"]
(work / "driver.c").write_text("\n".join(lines) + "\n")
build = subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-o", "driver", "driver.c", "duration.c"], cwd=work,
                       capture_output=True, text=True, timeout=60)
if build.returncode:
    sys.exit(f"FAIL: duration.c does not build with the test driver:\n{build.stderr}")
run = subprocess.run([str(work / "driver")], capture_output=True, text=True, timeout=30)
got = run.stdout.split()
want = [str(v) for v in CASES.values()] + ["-1"]
if run.returncode or len(got) != len(want):
    sys.exit(f"FAIL: the driver crashed or printed {len(got)} of {len(want)} answers (exit {run.returncode})")
wrong = [f"{case!r}: {g} (expected {w})" for case, g, w in zip([*CASES, "NULL"], got, want, strict=True) if g != w]
if wrong:
    sys.exit("FAIL: " + "; ".join(wrong))
print("ok")
