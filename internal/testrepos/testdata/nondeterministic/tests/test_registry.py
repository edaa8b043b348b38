from registry import (Item, fingerprint, ident, index_of, names_of, roll, stamp, tag, total,
                      wander, weak_name)


def test_tag():
    a = Item("a")
    assert tag(a).startswith("item-0x")


def test_ident():
    a = Item("a")
    assert ident(a) == id(a)


def test_fingerprint():
    assert isinstance(fingerprint(), int)


def test_stamp():
    now, nanos = stamp()
    assert now > 0 and nanos > 0


def test_names_of():
    items = [Item(n) for n in "abcdef"]
    assert names_of(items) == list("abcdef")


def test_index_of():
    assert index_of([Item("x"), Item("y")]) == 2


def test_weak_name():
    a = Item("w")
    alive, text = weak_name(a)
    assert alive and text.startswith("<weakref")


def test_roll():
    assert 3 <= roll(3) <= 18


def test_total():
    assert total([1, 2, 3]) == 6


def test_wander():
    assert isinstance(wander(), int)
