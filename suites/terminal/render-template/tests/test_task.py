"""Verifier of render-template: rendered.txt is exactly the expected rendering."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

expected = json.loads(Path("/tests/expected.json").read_text())
out = Path("/app/rendered.txt")
if not out.is_file():
    sys.exit(f"FAIL: {out} was not written")
data = out.read_bytes()
if hashlib.sha256(data).hexdigest() != expected["sha256"]:
    got, want = data.decode("utf-8", "replace").splitlines(), expected["text"].splitlines()
    diff = [f"line {i + 1}: {g!r} != {w!r}" for i, (g, w) in enumerate(zip(got, want, strict=False)) if g != w]
    sys.exit(f"FAIL: rendered.txt differs: {diff[:3] or 'in its line count or final newline'}")
print("ok")
