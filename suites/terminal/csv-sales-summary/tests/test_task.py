"""Verifier of csv-sales-summary: the region totals file matches the expected lines exactly."""

from __future__ import annotations

import json
import sys
from pathlib import Path

expected: list[str] = json.loads(Path("/tests/expected.json").read_text())["lines"]
out = Path("/app/out/region_totals.csv")
if not out.is_file():
    sys.exit(f"FAIL: {out} was not written")
got = out.read_text().splitlines()
if got != expected:
    sys.exit(f"FAIL: {out} has {got!r}, expected {expected!r}")
print("ok")
