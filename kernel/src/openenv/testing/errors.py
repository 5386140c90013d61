"""The failure every contract raises, and the two assertions the contracts are written with."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["ContractError", "expect", "no_raise"]


class ContractError(AssertionError):
    """An implementation broke a promise of its interface; the message says which and what was seen."""


def expect(condition: bool, message: str) -> None:
    """Raise ``ContractError(message)`` unless ``condition`` holds."""
    if not condition:
        raise ContractError(message)


def no_raise(fn: Callable[[], Any], message: str) -> Any:
    """Call ``fn``; an exception becomes ``ContractError`` starting with ``message``."""
    try:
        return fn()
    except Exception as exc:
        raise ContractError(f"{message}: {type(exc).__name__}: {exc}") from exc
