"""Verifier of find-large-files: the regular files over 4096 bytes outside .cache, in byte order."""

from __future__ import annotations

import json
import sys
from pathlib import Path

expected: list[str] = json.loads(Path("/tests/expected.json").read_text())["lines"]
out = Path("/app/large.txt")
if not out.is_file():
    sys.exit(f"FAIL: {out} was not written")
got = out.read_text().split("\n")
if got and got[-1] == "":
    got.pop()  # the final newline
if got != expected:
    sys.exit(f"FAIL: {out} holds {got[:20]!r}..., expected {expected[:20]!r}...")
print("ok")
