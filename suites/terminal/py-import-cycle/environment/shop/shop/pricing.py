"""Line prices: bulk pricing for some categories."""

from __future__ import annotations

from .models import Item

#: category -> (minimum quantity, percent off each unit)
BULK = {"hardware": (10, 15), "paper": (5, 10)}


def price_of(item: Item, qty: int) -> int:
    """Price in cents of qty units of item, with the bulk discount of its category."""
    if not isinstance(item, Item):
        raise TypeError(f"expected an Item, got {type(item).__name__}")
    minimum, percent = BULK.get(item.category, (0, 0))
    total = item.unit_cents * qty
    if minimum and qty >= minimum:
        total -= total * percent // 100
    return total
