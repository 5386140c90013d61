"""Verifier of normalize-line-endings: every file has the expected bytes (raw/ untouched), no extras."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

expected: dict[str, str] = json.loads(Path("/tests/expected.json").read_text())["sha256"]
root = Path("/app/docs")
present = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
if present != sorted(expected):
    sys.exit(f"FAIL: files under /app/docs changed: {sorted(set(present) ^ set(expected))!r}")
wrong = [rel for rel, sha in expected.items() if hashlib.sha256((root / rel).read_bytes()).hexdigest() != sha]
if wrong:
    sys.exit(f"FAIL: wrong content in {wrong!r}")
print("ok")
