"""A tiny shop: items, carts, prices and discounts."""

from .models import Cart, Item
from .checkout import checkout

__all__ = ["Cart", "Item", "checkout"]
