import pytest

from inventory import legacy_total, restock, total


@pytest.mark.unit
def test_restock(stock):
    assert restock(stock, "apple", 2) == 5
    assert restock(stock, "plum", 1) == 1


@pytest.mark.unit
def test_total(stock):
    assert total(stock) == 5


def test_legacy_total_is_an_error():
    # filterwarnings = error (pyproject.toml) turns the DeprecationWarning into an exception:
    # without it this test fails (DID NOT RAISE).
    with pytest.raises(DeprecationWarning):
        legacy_total({"apple": 1})


@pytest.mark.slow
def test_slow():
    # Deselected by -m 'not slow' in addopts: it fails if it ever runs.
    assert False, "addopts -m 'not slow' was not applied"
