"""Hidden tests of py-semver-sort."""

from __future__ import annotations

import random
import sys
import unittest

sys.path.append("/app/semver")  # appended: the agent's folder cannot shadow the standard library

import semver

ORDERED = ["0.0.1", "0.9.0", "0.10.0", "1.0.0-0", "1.0.0-1", "1.0.0-2", "1.0.0-10", "1.0.0-alpha", "1.0.0-alpha.1",
           "1.0.0-alpha.beta", "1.0.0-beta", "1.0.0-beta.2", "1.0.0-beta.11", "1.0.0-rc.1", "1.0.0", "1.0.1",
           "1.1.0-a-b", "1.1.0", "1.10.0", "2.0.0-x.7.z.92", "2.0.0", "10.0.0"]
VALID = ["0.0.0", "1.2.3", "1.2.3-0", "1.2.3-0a", "1.2.3-a.0", "1.2.3--", "1.2.3+001", "1.2.3-rc.1+build.5",
         "1.2.3+exp.sha.5114f85", "999999999999.0.0"]
INVALID = ["", "1", "1.2", "1.2.3.4", "v1.2.3", "01.2.3", "1.02.3", "1.2.03", " 1.2.3", "1.2.3 ", "1.2.3-",
           "1.2.3-01", "1.2.3-a..b", "1.2.3+", "1.2.3+a..b", "1.2.3-a_b", "-1.2.3", "1.2.3-é", "a.b.c"]


class Hidden(unittest.TestCase):
    def test_valid(self) -> None:
        for v in VALID:
            self.assertTrue(semver.is_valid(v), v)

    def test_invalid(self) -> None:
        for v in INVALID:
            self.assertFalse(semver.is_valid(v), v)

    def test_compare_pairs(self) -> None:
        for i, a in enumerate(ORDERED):
            for b in ORDERED[i + 1:]:
                self.assertEqual(semver.compare(a, b), -1, (a, b))
                self.assertEqual(semver.compare(b, a), 1, (b, a))
            self.assertEqual(semver.compare(a, a), 0, a)

    def test_build_metadata_ignored(self) -> None:
        self.assertEqual(semver.compare("1.0.0+a", "1.0.0+b"), 0)
        self.assertEqual(semver.compare("1.0.0-rc.1+x", "1.0.0-rc.1"), 0)

    def test_compare_rejects_invalid(self) -> None:
        with self.assertRaises(ValueError):
            semver.compare("1.0", "1.0.0")
        with self.assertRaises(ValueError):
            semver.compare("1.0.0", "01.0.0")

    def test_sort(self) -> None:
        shuffled = ORDERED[:]
        random.Random(7).shuffle(shuffled)
        self.assertEqual(semver.sort_versions(shuffled), ORDERED)
        self.assertEqual(shuffled != ORDERED, True)  # the input list is not sorted in place

    def test_sort_is_stable(self) -> None:
        versions = ["1.0.0+b", "0.1.0", "1.0.0+a", "1.0.0"]
        self.assertEqual(semver.sort_versions(versions), ["0.1.0", "1.0.0+b", "1.0.0+a", "1.0.0"])

    def test_sort_rejects_invalid(self) -> None:
        with self.assertRaises(ValueError):
            semver.sort_versions(["1.0.0", "1.0"])


if __name__ == "__main__":
    unittest.main()
