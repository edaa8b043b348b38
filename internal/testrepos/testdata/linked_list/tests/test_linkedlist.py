from linkedlist import LinkedList, Node, group_by_parity, pairs, tagged


def test_values():
    assert LinkedList([1, 2, 3]).values() == [1, 2, 3]


def test_values_reversed():
    assert LinkedList("abc").values(reverse=True) == ["c", "b", "a"]


def test_step():
    lst = LinkedList([4, 5])
    assert lst.head.step().value == 5
    assert isinstance(lst.tail, Node)


def test_group_by_parity():
    assert group_by_parity([1, 2, 3, 4]) == {"odd": [1, 3], "even": [2, 4]}


def test_pairs():
    assert pairs([1, 2, 3]) == [(1, 2), (1, 3), (2, 3)]


def test_tagged():
    assert tagged(3) == "item:3"
    try:
        tagged(3, "nope")
    except ValueError:
        pass
    else:
        raise AssertionError("no ValueError")
