"""Verifier of ssh-bruteforce: offenders (with counts, in order) and compromised IPs."""

from __future__ import annotations

import json
import sys
from pathlib import Path

expected = json.loads(Path("/tests/expected.json").read_text())
out = Path("/app/bruteforce.json")
try:
    got = json.loads(out.read_text())
except (OSError, ValueError) as exc:
    sys.exit(f"FAIL: {out} is missing or not JSON ({exc})")
if not isinstance(got, dict):
    sys.exit("FAIL: expected a JSON object")
if got.get("offenders") != expected["offenders"]:
    sys.exit(f"FAIL: offenders {got.get('offenders')!r}, expected {expected['offenders']!r}")
if got.get("compromised") != expected["compromised"]:
    sys.exit(f"FAIL: compromised {got.get('compromised')!r}, expected {expected['compromised']!r}")
print("ok")
