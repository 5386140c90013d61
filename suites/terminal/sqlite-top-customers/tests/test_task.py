"""Verifier of sqlite-top-customers: the five names, in order, with totals to the cent."""

from __future__ import annotations

import json
import sys
from pathlib import Path

expected: list[dict[str, object]] = json.loads(Path("/tests/expected.json").read_text())["top"]
out = Path("/app/top_customers.json")
try:
    got = json.loads(out.read_text())
except (OSError, ValueError) as exc:
    sys.exit(f"FAIL: {out} is missing or not JSON ({exc})")
if not isinstance(got, list) or len(got) != 5 or not all(isinstance(g, dict) for g in got):
    sys.exit(f"FAIL: expected a JSON array of 5 objects, got {got!r}")
for rank, (g, e) in enumerate(zip(got, expected, strict=True), 1):
    total = g.get("total")
    if g.get("name") != e["name"] or not isinstance(total, int | float) or abs(total - e["total"]) > 0.005:
        sys.exit(f"FAIL: rank {rank} is {g!r}, expected {e!r}")
print("ok")
