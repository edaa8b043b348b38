import time

import pytest

from shapes import area, stress


def test_square():
    assert area("square", 3) == 9


def test_rect():
    assert area("rect", 2, 5) == 10


def test_unknown():
    with pytest.raises(ValueError):
        area("circle", 1)


@pytest.mark.slow
def test_stress():
    time.sleep(3600)  # a stress test: deselected by the repository's -m "not slow"
    assert stress(10**9) > 0
