"""Verifier of jq-user-stats: the per-user object equals the one computed from the events."""

from __future__ import annotations

import json
import sys
from pathlib import Path

expected = json.loads(Path("/tests/expected.json").read_text())
out = Path("/app/user_stats.json")
try:
    got = json.loads(out.read_text())
except (OSError, ValueError) as exc:
    sys.exit(f"FAIL: {out} is missing or not JSON ({exc})")
if not isinstance(got, dict) or sorted(got) != sorted(expected):
    sys.exit(f"FAIL: expected users {sorted(expected)}, got {sorted(got) if isinstance(got, dict) else got!r}")
for user, stats in expected.items():
    if got[user] != stats:
        sys.exit(f"FAIL: {user}: {got[user]!r}, expected {stats!r}")
print("ok")
