import unittest

from textutil import Stack, title_case, word_count


class WordCountTest(unittest.TestCase):
    def test_counts(self):
        self.assertEqual(word_count("The cat. the hat!"), {"the": 2, "cat": 1, "hat": 1})

    def test_empty(self):
        self.assertEqual(word_count("   "), {})


class TitleCaseTest(unittest.TestCase):
    def test_title(self):
        self.assertEqual(title_case("neural debugger data"), "Neural Debugger Data")


class StackTest(unittest.TestCase):
    def test_push_pop(self):
        s = Stack()
        s.push(1)
        s.push(2)
        self.assertEqual(s.pop(), 2)
        self.assertEqual(s.pop(), 1)

    def test_pop_empty(self):
        with self.assertRaises(IndexError):
            Stack().pop()


if __name__ == "__main__":
    unittest.main()
