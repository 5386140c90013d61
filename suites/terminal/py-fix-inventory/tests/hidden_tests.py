"""Hidden tests of py-fix-inventory (the documented behaviour of every method)."""

from __future__ import annotations

import sys
import unittest

sys.path.append("/app/inventory")  # appended: the agent's folder cannot shadow the standard library

from inventory import Inventory, OutOfStock


class Hidden(unittest.TestCase):
    def setUp(self) -> None:
        self.inv = Inventory()
        self.inv.add("bolt", 5)
        self.inv.add("nut", 10)

    def test_add_rejects_non_positive(self) -> None:
        for qty in (0, -1):
            with self.assertRaises(ValueError):
                self.inv.add("bolt", qty)

    def test_remove_some(self) -> None:
        self.inv.remove("bolt", 2)
        self.assertEqual(self.inv.quantity("bolt"), 3)

    def test_remove_everything_forgets_sku(self) -> None:
        self.inv.remove("bolt", 5)
        self.assertEqual(self.inv.quantity("bolt"), 0)
        self.assertEqual(self.inv.skus(), ["nut"])

    def test_remove_too_many_changes_nothing(self) -> None:
        with self.assertRaises(OutOfStock):
            self.inv.remove("bolt", 6)
        with self.assertRaises(OutOfStock):
            self.inv.remove("washer", 1)
        self.assertEqual((self.inv.quantity("bolt"), self.inv.skus()), (5, ["bolt", "nut"]))

    def test_out_of_stock_is_value_error(self) -> None:
        self.assertTrue(issubclass(OutOfStock, ValueError))

    def test_remove_rejects_non_positive(self) -> None:
        with self.assertRaises(ValueError):
            self.inv.remove("bolt", 0)

    def test_low_stock_is_strict(self) -> None:
        self.assertEqual(self.inv.low_stock(10), ["bolt"])
        self.assertEqual(self.inv.low_stock(5), [])
        self.assertEqual(self.inv.low_stock(11), ["bolt", "nut"])

    def test_total_value(self) -> None:
        self.assertAlmostEqual(self.inv.total_value({"bolt": 0.5, "nut": 0.25, "extra": 9.0}), 5.0)

    def test_total_value_missing_price(self) -> None:
        with self.assertRaises(KeyError):
            self.inv.total_value({"bolt": 0.5})


if __name__ == "__main__":
    unittest.main()
