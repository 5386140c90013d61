import sys
import unittest

sys.path.append("/app")  # appended: stdlib modules are never looked up in the agent's tree first

import calc


class TestAdd(unittest.TestCase):
    def test_add(self) -> None:
        self.assertEqual(calc.add(2, 3), 5)
        self.assertEqual(calc.add(-4, 1), -3)
        self.assertEqual(calc.add(0, 0), 0)


if __name__ == "__main__":
    unittest.main()
