import unittest

from inventory import Inventory, OutOfStock


class InventoryTest(unittest.TestCase):
    def test_add_and_quantity(self) -> None:
        inv = Inventory()
        inv.add("bolt", 5)
        inv.add("bolt", 2)
        self.assertEqual(inv.quantity("bolt"), 7)

    def test_remove_everything(self) -> None:
        inv = Inventory()
        inv.add("nut", 3)
        inv.remove("nut", 3)
        self.assertEqual(inv.quantity("nut"), 0)

    def test_remove_too_many(self) -> None:
        inv = Inventory()
        inv.add("nut", 3)
        with self.assertRaises(OutOfStock):
            inv.remove("nut", 4)
        self.assertEqual(inv.quantity("nut"), 3)

    def test_low_stock(self) -> None:
        inv = Inventory()
        inv.add("a", 5)
        inv.add("b", 10)
        self.assertEqual(inv.low_stock(10), ["a"])


if __name__ == "__main__":
    unittest.main()
