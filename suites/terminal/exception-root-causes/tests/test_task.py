"""Verifier of exception-root-causes: the root-cause histogram equals the expected one."""

from __future__ import annotations

import json
import sys
from pathlib import Path

expected = json.loads(Path("/tests/expected.json").read_text())
out = Path("/app/root_causes.json")
try:
    got = json.loads(out.read_text())
except (OSError, ValueError) as exc:
    sys.exit(f"FAIL: {out} is missing or not JSON ({exc})")
if got != expected:
    sys.exit(f"FAIL: {got!r}, expected {expected!r}")
print("ok")
