"""Stock levels per SKU."""

from __future__ import annotations


class OutOfStock(ValueError):
    """Raised when removing more units than are in stock."""


class Inventory:
    def __init__(self) -> None:
        self._stock: dict[str, int] = {}

    def add(self, sku: str, qty: int) -> None:
        """Add qty (> 0) units of sku; a qty of 0 or less raises ValueError."""
        if qty <= 0:
            raise ValueError(f"qty must be positive, got {qty}")
        self._stock[sku] = self._stock.get(sku, 0) + qty

    def remove(self, sku: str, qty: int) -> None:
        """Remove qty (> 0) units of sku. Removing more than is in stock raises OutOfStock and
        changes nothing; removing everything is allowed, and the SKU is then forgotten (it no
        longer appears in skus())."""
        if qty <= 0:
            raise ValueError(f"qty must be positive, got {qty}")
        have = self._stock.get(sku, 0)
        if qty >= have:
            raise OutOfStock(f"{sku}: {have} in stock, {qty} requested")
        self._stock[sku] = have - qty

    def quantity(self, sku: str) -> int:
        """Units of sku in stock (0 for an unknown SKU)."""
        return self._stock.get(sku, 0)

    def skus(self) -> list[str]:
        """The SKUs in stock, sorted."""
        return sorted(self._stock)

    def low_stock(self, threshold: int) -> list[str]:
        """The SKUs in stock with strictly fewer than threshold units, sorted."""
        return sorted(s for s, q in self._stock.items() if q <= threshold)

    def total_value(self, prices: dict[str, float]) -> float:
        """Sum of quantity * price over the SKUs in stock; a SKU without a price raises KeyError."""
        return sum(q * prices.get(s, 0) for s, q in self._stock.items())
