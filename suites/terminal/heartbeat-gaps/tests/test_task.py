"""Verifier of heartbeat-gaps: every gap of more than 30 s, per host, in order."""

from __future__ import annotations

import json
import sys
from pathlib import Path

expected: list[str] = json.loads(Path("/tests/expected.json").read_text())["lines"]
out = Path("/app/gaps.csv")
if not out.is_file():
    sys.exit(f"FAIL: {out} was not written")
got = [line.rstrip("\r") for line in out.read_text().splitlines() if line.strip()]
if got != expected:
    sys.exit(f"FAIL: {out} holds {got!r}, expected {expected!r}")
print("ok")
