import pytest


@pytest.fixture
def stock():
    return {"apple": 3, "pear": 2}
