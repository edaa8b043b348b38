import gc

from calc import add

# A count of the interpreter's objects, taken when the module is imported (during collection).
LIVE = len(gc.get_objects())


def test_live():
    assert LIVE > 0
    assert add(LIVE, 0) == LIVE
