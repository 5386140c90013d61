"""A tiny stock-keeping library."""

from .core import Inventory, OutOfStock

__all__ = ["Inventory", "OutOfStock"]
