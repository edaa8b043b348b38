# hypothesis is deliberately not installed: collecting this module fails with ModuleNotFoundError.
from hypothesis import given
from hypothesis import strategies as st

from mathutil import clamp


@given(st.integers(), st.integers(0, 10))
def test_clamp_in_range(x, hi):
    assert 0 <= clamp(x, 0, hi) <= hi
