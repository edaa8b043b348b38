# quickprops is a property-testing package that is deliberately not installed (it exists nowhere):
# collecting this module fails with ModuleNotFoundError.
from quickprops import given
from quickprops import strategies as st

from mathutil import clamp


@given(st.integers(), st.integers(0, 10))
def test_clamp_in_range(x, hi):
    assert 0 <= clamp(x, 0, hi) <= hi
