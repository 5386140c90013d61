"""Checkout of a cart described as plain data."""

from __future__ import annotations

from .discounts import apply
from .models import Cart, Item


def checkout(lines: list[dict[str, object]], code: str | None = None) -> int:
    """Total in cents of [{"sku", "unit_cents", "category", "qty"}, ...] after the discount code."""
    cart = Cart()
    for line in lines:
        item = Item(str(line["sku"]), int(line["unit_cents"]), str(line.get("category", "general")))  # type: ignore[call-overload]
        cart.add(item, int(line.get("qty", 1)))  # type: ignore[call-overload]
    return apply(cart, code)
