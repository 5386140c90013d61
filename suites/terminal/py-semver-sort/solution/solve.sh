#!/usr/bin/env bash
# Oracle: a regex for validity, a tuple key for precedence (sorted() is stable).
set -euo pipefail
cat > /app/semver/semver.py <<'PY'
"""Semantic Versioning 2.0.0 (https://semver.org): validation and precedence."""

from __future__ import annotations

import functools
import re

__all__ = ["compare", "is_valid", "sort_versions"]

_NUM = r"(?:0|[1-9][0-9]*)"
_PRE_ID = rf"(?:{_NUM}|[0-9]*[A-Za-z-][0-9A-Za-z-]*)"
_PATTERN = re.compile(rf"({_NUM})\.({_NUM})\.({_NUM})(?:-({_PRE_ID}(?:\.{_PRE_ID})*))?(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?")


def is_valid(version: str) -> bool:
    return isinstance(version, str) and _PATTERN.fullmatch(version) is not None


def _key(version: str) -> tuple:
    match = _PATTERN.fullmatch(version) if isinstance(version, str) else None
    if match is None:
        raise ValueError(f"not a semantic version: {version!r}")
    core = tuple(int(match[i]) for i in (1, 2, 3))
    if match[4] is None:
        return core + ((1,),)
    ids = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in match[4].split("."))
    return core + ((0, ids),)


def compare(a: str, b: str) -> int:
    ka, kb = _key(a), _key(b)
    return (ka > kb) - (ka < kb)


def sort_versions(versions: list[str]) -> list[str]:
    return sorted(versions, key=functools.cmp_to_key(compare))


if __name__ == "__main__":
    import sys

    print("\n".join(sort_versions(sys.stdin.read().split())))
PY
