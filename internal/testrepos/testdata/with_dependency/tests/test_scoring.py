from scoring import score, scores


def test_score():
    assert score(0) == 42


def test_bonus():
    assert score(8) == 50


def test_scores():
    assert scores([1, 2]) == [43, 44]
