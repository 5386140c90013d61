"""Verifier of top-client-ips: the five busiest IPs with their request counts, in order."""

from __future__ import annotations

import json
import sys
from pathlib import Path

expected: list[str] = json.loads(Path("/tests/expected.json").read_text())["lines"]
out = Path("/app/top_ips.txt")
if not out.is_file():
    sys.exit(f"FAIL: {out} was not written")
got = [line.rstrip("\r") for line in out.read_text().splitlines() if line.strip()]
if got != expected:
    sys.exit(f"FAIL: {out} holds {got!r}, expected {expected!r}")
print("ok")
