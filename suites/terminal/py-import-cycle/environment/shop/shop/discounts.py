"""Cart-level discount codes."""

from __future__ import annotations

from .models import Cart

CODES = {"WELCOME5": ("fixed", 500), "SPRING10": ("percent", 10)}


def apply(cart: Cart, code: str | None) -> int:
    """The cart's total in cents after the discount code (never below zero); unknown codes raise KeyError."""
    subtotal = cart.subtotal_cents()
    if code is None:
        return subtotal
    kind, amount = CODES[code]
    off = amount if kind == "fixed" else subtotal * amount // 100
    return max(0, subtotal - off)
