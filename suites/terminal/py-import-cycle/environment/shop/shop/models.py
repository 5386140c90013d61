"""Items and carts."""

from __future__ import annotations

from dataclasses import dataclass, field

from .pricing import price_of


@dataclass(frozen=True)
class Item:
    sku: str
    unit_cents: int
    category: str = "general"


@dataclass
class Cart:
    lines: list[tuple[Item, int]] = field(default_factory=list)

    def add(self, item: Item, qty: int = 1) -> None:
        self.lines.append((item, qty))

    def subtotal_cents(self) -> int:
        """Sum of each line's price (see pricing.price_of)."""
        return sum(price_of(item, qty) for item, qty in self.lines)
