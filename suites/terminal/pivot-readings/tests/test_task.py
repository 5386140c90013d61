"""Verifier of pivot-readings: wide.csv equals the pivot of the original readings."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

expected: list[list[str]] = json.loads(Path("/tests/expected.json").read_text())["rows"]
out = Path("/app/wide.csv")
if not out.is_file():
    sys.exit(f"FAIL: {out} was not written")
with out.open(newline="") as f:
    rows = [r for r in csv.reader(f) if r]
if rows[:1] != expected[:1]:
    sys.exit(f"FAIL: header {rows[:1]!r}, expected {expected[:1]!r}")
if rows != expected:
    diff = next((i for i, (a, b) in enumerate(zip(rows, expected, strict=False)) if a != b), None)
    sys.exit(f"FAIL: {len(rows)} rows (expected {len(expected)}); first differing row: "
             f"{rows[diff] if diff is not None else 'none'!r}")
print("ok")
