from loops import countdown


def test_countdown():
    assert countdown(3) == [3, 2, 1]


def test_forever():
    # Never ends: a runner must stop it with a timeout.
    while True:
        pass
