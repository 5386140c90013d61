"""Verifier of csv-clean-join: report.csv equals the summary computed from the clean data."""

from __future__ import annotations

import json
import sys
from pathlib import Path

expected: list[str] = json.loads(Path("/tests/expected.json").read_text())["lines"]
out = Path("/app/report.csv")
if not out.is_file():
    sys.exit(f"FAIL: {out} was not written")
got = [line.rstrip("\r") for line in out.read_text().splitlines() if line.strip()]
if got != expected:
    sys.exit(f"FAIL: report.csv is {got!r}, expected {expected!r}")
print("ok")
