from mathutil import Counter, clamp, mean, primes_below, total


def test_clamp():
    assert clamp(5, 0, 3) == 3
    assert clamp(-1, 0, 3) == 0
    assert clamp(2, 0, 3) == 2


def test_total():
    assert total([1, 2, 3, 4]) == 10


def test_mean():
    assert mean([2, 4, 9]) == 5


def test_mean_empty():
    try:
        mean([])
    except ValueError as e:
        assert "empty" in str(e)
    else:
        assert False, "mean([]) did not raise"


def test_primes_below():
    assert primes_below(20) == [2, 3, 5, 7, 11, 13, 17, 19]


def test_counter():
    c = Counter(10)
    c.add(5)
    assert c.add(-3) == 12
