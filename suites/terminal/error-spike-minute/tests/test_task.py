"""Verifier of error-spike-minute: the one line naming the minute, its 5xx count and the path."""

from __future__ import annotations

import json
import sys
from pathlib import Path

expected: str = json.loads(Path("/tests/expected.json").read_text())["line"]
out = Path("/app/spike.txt")
if not out.is_file():
    sys.exit(f"FAIL: {out} was not written")
got = [line.strip() for line in out.read_text().splitlines() if line.strip()]
if got != [expected]:
    sys.exit(f"FAIL: spike.txt holds {got!r}, expected [{expected!r}]")
print("ok")
