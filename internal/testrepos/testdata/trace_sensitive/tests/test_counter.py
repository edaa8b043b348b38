from counter import Noisy, double, traced_now


def test_double():
    assert double(21) == 42


def test_repr_side_effect():
    # A tracer that renders locals calls repr(): the count changes under tracing.
    before = Noisy.reprs
    n = Noisy(3)
    assert n.n == 3
    assert Noisy.reprs == before


def test_not_traced():
    assert not traced_now()
