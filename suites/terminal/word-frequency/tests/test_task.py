"""Verifier of word-frequency: the ten most frequent non-stopwords with counts, in order."""

from __future__ import annotations

import json
import sys
from pathlib import Path

expected: list[str] = json.loads(Path("/tests/expected.json").read_text())["lines"]
out = Path("/app/top10.txt")
if not out.is_file():
    sys.exit(f"FAIL: {out} was not written")
got = out.read_text().split("\n")
if got and got[-1] == "":
    got.pop()  # the final newline
if got != expected:
    sys.exit(f"FAIL: {out} holds {got[:20]!r}..., expected {expected[:20]!r}...")
print("ok")
