from textstats import Histogram, caesar, most_common, normalize, word_counts, words


def test_normalize():
    assert normalize("Hello,") == "hello"
    assert normalize("--") == ""


def test_words():
    assert words("The cat, the HAT!") == ["the", "cat", "the", "hat"]


def test_word_counts():
    assert word_counts("a b a c b a") == {"a": 3, "b": 2, "c": 1}


def test_most_common():
    assert most_common("x y z y z z", 2) == ["z", "y"]


def test_caesar_round_trip():
    secret = caesar("attack at dawn", 3)
    assert secret == "dwwdfn dw gdzq"
    assert caesar(secret, -3) == "attack at dawn"


def test_histogram():
    h = Histogram(10)
    h.add("cats", 4)
    h.add("dogs", 2)
    h.add("cats", 4)
    assert h.render().splitlines() == ["  cats ##########", "  dogs ##"]
