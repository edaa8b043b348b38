import pytest

from geometry import area, perimeter


def test_area():
    assert area(2, 3) == 6


def test_perimeter():
    assert perimeter(2, 3) == 10


def test_negative():
    with pytest.raises(ValueError):
        area(-1, 2)
