import asyncio

from lazy import chunks, countdown, evens, fib, naturals, plus_one, scaled, squares, tagged


def test_squares():
    assert list(squares(4)) == [0, 1, 4, 9]


def test_countdown():
    assert list(countdown(3)) == [3, 2, 1]


def test_naturals():
    it = naturals(5)
    assert next(it) == 5
    assert next(it) == 6


def test_chunks():
    assert list(chunks([1, 2, 3, 4, 5], 2)) == [[1, 2], [3, 4], [5]]


def test_evens():
    assert list(evens([1, 2, 3, 4])) == [2, 4]


def test_scaled():
    assert list(scaled([1, 2], 3)) == [3, 6]


def test_fib():
    assert list(fib(10)) == [1, 1, 2, 3, 5, 8]


def test_plus_one():
    assert asyncio.run(plus_one(1)) == 2


def test_tagged():
    with tagged("b") as t:
        assert t == "<b>"
