"""Verifier of organize-photos: each photo moved to its dated name with its content; others kept."""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

expected = json.loads(Path("/tests/expected.json").read_text())
photos, incoming = Path("/app/photos"), Path("/app/incoming")
found = sorted(str(p.relative_to(photos)) for p in photos.rglob("*") if p.is_file()) if photos.is_dir() else []
if found != sorted(expected["moved"]):
    sys.exit(f"FAIL: /app/photos holds {found[:10]!r}..., expected {sorted(expected['moved'])[:10]!r}...")
for rel, sha in expected["moved"].items():
    if hashlib.sha256((photos / rel).read_bytes()).hexdigest() != sha:
        sys.exit(f"FAIL: {rel} does not hold the original photo")
left = sorted(p.name for p in incoming.iterdir()) if incoming.is_dir() else []
if left != sorted(expected["kept"]):
    sys.exit(f"FAIL: /app/incoming holds {left!r}, expected exactly {sorted(expected['kept'])!r}")
print("ok")
