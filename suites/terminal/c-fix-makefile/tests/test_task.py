"""Verifier of c-fix-makefile: the agent's Makefile builds and cleans the *original* sources."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

makefile = Path("/app/wc/Makefile")
if not makefile.is_file():
    sys.exit("FAIL: /app/wc/Makefile is missing")
# Build in a scratch copy: the original sources (kept with the tests) and only the agent's Makefile.
work = Path(tempfile.mkdtemp())
for src in Path("/tests/pristine").iterdir():
    shutil.copy(src, work / src.name)
shutil.copy(makefile, work / "Makefile")


def run(cmd: list[str], stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(cmd, cwd=work, input=stdin, capture_output=True, timeout=60)


build = run(["make"])
if build.returncode or not (work / "wordcount").is_file():
    sys.exit(f"FAIL: make did not build wordcount:\n{build.stdout.decode()}{build.stderr.decode()}")
for sample in [b"", b"one\n", b"hello world\n  two  words here\n\tend", b"a b c\n" * 50]:
    got = run(["./wordcount"], sample).stdout.decode().split()
    want = [str(sample.count(b"\n")), str(len(sample.split())), str(len(sample))]
    if got != want:
        sys.exit(f"FAIL: wordcount gave {got} for {sample[:30]!r}, expected {want}")
clean = run(["make", "clean"])
left = sorted(p.name for p in work.iterdir() if p.suffix == ".o" or p.name == "wordcount")
if clean.returncode or left:
    sys.exit(f"FAIL: make clean failed or left {left}")
print("ok")
