"""The suite, as one unittest module at the top (pytest's default patterns do not collect it)."""
import unittest

from roman import from_roman, to_roman


class ToRomanTest(unittest.TestCase):
    def test_small(self):
        self.assertEqual(to_roman(14), "XIV")

    def test_year(self):
        self.assertEqual(to_roman(1994), "MCMXCIV")

    def test_out_of_range(self):
        with self.assertRaises(ValueError):
            to_roman(0)


class FromRomanTest(unittest.TestCase):
    def test_round_trip(self):
        for n in (1, 4, 9, 40, 388, 3999):
            self.assertEqual(from_roman(to_roman(n)), n)

    def test_bad(self):
        with self.assertRaises(ValueError):
            from_roman("IIII!")


if __name__ == "__main__":
    unittest.main()
