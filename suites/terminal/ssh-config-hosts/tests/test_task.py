"""Verifier of ssh-config-hosts: resolves every alias the way ssh does (Host patterns with * ? and
!negation, first value wins, case-insensitive keywords, 'Key value' or 'Key=value') and compares
the effective options."""

from __future__ import annotations

import csv
import fnmatch
import re
import sys
from pathlib import Path

path = Path("/app/ssh/config")
if not path.is_file():
    sys.exit(f"FAIL: {path} is missing")
blocks: list[tuple[list[str], list[tuple[str, str]]]] = [(["*"], [])]  # options before any Host apply to all
for number, raw in enumerate(path.read_text().splitlines(), 1):
    line = raw.strip()
    if not line or line.startswith("#"):
        continue
    match = re.match(r"(\S+?)\s*(?:=\s*|\s+)(.+)", line)
    if not match:
        sys.exit(f"FAIL: line {number} is not 'Keyword value': {raw!r}")
    key, value = match[1].lower(), match[2].strip()
    if key == "host":
        blocks.append((value.split(), []))
    elif key == "match":
        sys.exit(f"FAIL: line {number}: Match blocks are not expected here")
    else:
        blocks[-1][1].append((key, value.strip('"')))


def matches(patterns: list[str], alias: str) -> bool:
    if any(p.startswith("!") and fnmatch.fnmatchcase(alias, p[1:]) for p in patterns):
        return False
    return any(not p.startswith("!") and fnmatch.fnmatchcase(alias, p) for p in patterns)


def resolve(alias: str) -> dict[str, str]:
    options: dict[str, str] = {}
    for patterns, entries in blocks:
        if matches(patterns, alias):
            for key, value in entries:
                options.setdefault(key, value)
    return options


with open("/tests/hosts.csv", newline="") as f:
    rows = list(csv.DictReader(f))
for row in rows:
    want = {"hostname": row["hostname"], "user": row["user"], "port": row["port"], "serveraliveinterval": "60",
            "identitiesonly": "yes", "identityfile": "~/.ssh/id_ed25519"}
    if row["jump"]:
        want["proxyjump"] = row["jump"]
    got = resolve(row["alias"])
    got["identitiesonly"] = got.get("identitiesonly", "").lower()
    if got != want:
        diff = {k: (got.get(k), want.get(k)) for k in set(got) | set(want) if got.get(k) != want.get(k)}
        sys.exit(f"FAIL: ssh {row['alias']} resolves differently (got, wanted): {diff}")
print("ok")
