"""Semantic Versioning 2.0.0 (https://semver.org): validation and precedence."""

from __future__ import annotations

__all__ = ["compare", "is_valid", "sort_versions"]


def is_valid(version: str) -> bool:
    """True when version is a valid SemVer 2.0.0 string (no leading "v")."""
    raise NotImplementedError


def compare(a: str, b: str) -> int:
    """-1, 0 or 1 as a has lower, equal or higher precedence than b (build metadata is ignored).
    Raises ValueError naming the first invalid argument."""
    raise NotImplementedError


def sort_versions(versions: list[str]) -> list[str]:
    """A new list in ascending precedence; versions of equal precedence keep their input order.
    Raises ValueError when any version is invalid."""
    raise NotImplementedError


if __name__ == "__main__":
    import sys

    print("\n".join(sort_versions(sys.stdin.read().split())))
