"""A doubly linked list whose nodes keep their links in a list indexed by PREV and NEXT."""
import itertools
from collections import defaultdict

PREV, NEXT = 0, 1
DEFAULT_TAG = "item"
TAGS = (DEFAULT_TAG, "head")  # defined from another constant


class Node:
    """One link of a list."""

    kind = "node"

    def __init__(self, value):
        self.links = [None, None]
        self.value = value

    def step(self, direction=NEXT):
        return self.links[direction]


class LinkedList:
    node_class = Node
    max_size = 100

    def __init__(self, values=()):
        self.head = None
        self.tail = None
        self.size = 0
        for v in values:
            self.append(v)

    def append(self, value):
        if self.size >= self.max_size:
            raise OverflowError(value)
        node = self.node_class(value)
        if self.tail is None:
            self.head = self.tail = node
        else:
            node.links[PREV] = self.tail
            self.tail.links[NEXT] = node
            self.tail = node
        self.size += 1
        return node

    def values(self, reverse=False):
        out = []
        node = self.tail if reverse else self.head
        direction = PREV if reverse else NEXT
        while node is not None:
            out.append(node.value)
            node = node.links[direction]
        return out


def group_by_parity(values):
    groups = defaultdict(list)
    for v in values:
        groups["even" if v % 2 == 0 else "odd"].append(v)
    return dict(groups)


def pairs(values):
    return list(itertools.combinations(values, 2))


def tagged(value, tag=DEFAULT_TAG):
    if tag not in TAGS:
        raise ValueError(tag)
    return f"{tag}:{value}"
