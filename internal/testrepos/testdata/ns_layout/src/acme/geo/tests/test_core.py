from acme.geo.core import manhattan, midpoint


def test_midpoint():
    assert midpoint((0, 0), (2, 4)) == (1.0, 2.0)


def test_manhattan():
    assert manhattan((1, 1), (4, 5)) == 7
