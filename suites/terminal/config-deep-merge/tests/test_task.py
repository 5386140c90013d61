"""Verifier of config-deep-merge: effective.json equals the merge computed here from the original
inputs (kept with the tests), and the inputs in /app were left alone."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


base = json.loads(Path("/tests/base.json").read_text())
over = json.loads(Path("/tests/prod.json").read_text())
for original, copy in ((base, "/app/config/base.json"), (over, "/app/config/overrides/prod.json")):
    try:
        unchanged = json.loads(Path(copy).read_text()) == original
    except (OSError, ValueError):
        unchanged = False
    if not unchanged:
        sys.exit(f"FAIL: {copy} was modified")
out = Path("/app/config/effective.json")
try:
    got = json.loads(out.read_text())
except (OSError, ValueError) as exc:
    sys.exit(f"FAIL: {out} is missing or not JSON ({exc})")
want = merge(base, over)
if got != want:
    wrong = sorted(k for k in set(got) | set(want) if got.get(k) != want.get(k)) if isinstance(got, dict) else "all"
    sys.exit(f"FAIL: effective.json differs from the merge at top-level keys {wrong}")
print("ok")
