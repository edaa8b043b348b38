from textkit import shout


def test_shout():
    assert shout("hi", 2) == "HI HI"


def test_shout_none():
    assert shout("hi", 0) == ""
