"""Verifier of c-rle-off-by-one: the agent's rle.c, rebuilt here, encodes per the README and
round-trips every sample."""

from __future__ import annotations

import itertools
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

source = Path("/app/rle/rle.c")
if not source.is_file():
    sys.exit("FAIL: /app/rle/rle.c is missing")
work = Path(tempfile.mkdtemp())
shutil.copy(source, work / "rle.c")
build = subprocess.run(["gcc", "-O2", "-Wall", "-o", "rle", "rle.c"], cwd=work, capture_output=True, text=True,
                       timeout=60)
if build.returncode:
    sys.exit(f"FAIL: rle.c does not build:\n{build.stderr}")


def encode(data: bytes) -> bytes:
    return b"".join(str(len(list(run))).encode() + bytes([b]) for b, run in itertools.groupby(data))


no_digits = bytes(b for b in range(256) if not 48 <= b <= 57)  # digit bytes would make the format ambiguous
samples = [b"", b"a", b"aaab\n", b"abc", b"x" * 300, b"--++  \n\n\n", b"\x00\x00\xff" + b"z" * 1000 + b"\n",
           no_digits * 3, b"ab" * 500 + b"c" * 70000]
for data in samples:
    enc = subprocess.run([str(work / "rle")], input=data, capture_output=True, timeout=30)
    if enc.returncode or enc.stdout != encode(data):
        sys.exit(f"FAIL: encoding {data[:20]!r}... gave {enc.stdout[:40]!r}, expected {encode(data)[:40]!r}")
    dec = subprocess.run([str(work / "rle"), "-d"], input=enc.stdout, capture_output=True, timeout=30)
    if dec.returncode or dec.stdout != data:
        sys.exit(f"FAIL: decoding the encoding of {data[:20]!r}... does not give it back")
print("ok")
