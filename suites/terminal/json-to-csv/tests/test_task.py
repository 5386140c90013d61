"""Verifier of json-to-csv: users.csv parses as CSV and holds exactly the expected rows."""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

expected: list[list[str]] = json.loads(Path("/tests/expected.json").read_text())["rows"]
out = Path("/app/users.csv")
if not out.is_file():
    sys.exit(f"FAIL: {out} was not written")
with out.open(newline="") as f:
    rows = list(csv.reader(f))
if not rows or rows[0] != ["id", "full_name", "email", "city", "country", "tags", "active"]:
    sys.exit(f"FAIL: wrong header {rows[:1]!r}")
if rows[1:] != expected:
    got = rows[1:]
    bad = next((i for i, (a, b) in enumerate(zip(got, expected, strict=False)) if a != b), min(len(got), len(expected)))
    sys.exit(f"FAIL: {len(got)} rows (expected {len(expected)}); first difference at data row {bad + 1}: "
             f"{got[bad] if bad < len(got) else None!r} vs {expected[bad] if bad < len(expected) else None!r}")
print("ok")
