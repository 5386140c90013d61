"""Verifier of split-chapters: exactly the expected chapter files, each with the expected bytes."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

expected: dict[str, str] = json.loads(Path("/tests/expected.json").read_text())["sha256"]
folder = Path("/app/chapters")
present = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
if present != sorted(expected):
    sys.exit(f"FAIL: /app/chapters holds {present!r}, expected {sorted(expected)!r}")
wrong = [n for n, sha in expected.items() if hashlib.sha256((folder / n).read_bytes()).hexdigest() != sha]
if wrong:
    sys.exit(f"FAIL: wrong content in {wrong!r}")
print("ok")
