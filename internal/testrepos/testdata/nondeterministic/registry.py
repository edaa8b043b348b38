"""Values that change from one run of the same code to the next: object ids and the strings and
hashes made of them, the clock, the iteration order of a set of objects, weak references, and
bytes from the operating system's random source. Only the last changes what the code does."""

import os
import random
import time
import weakref


class Item:
    def __init__(self, name):
        self.name = name


def tag(obj):
    address = hex(id(obj))
    label = "item-" + address
    return label


def ident(obj):
    number = id(obj)
    return number


def fingerprint():
    token = object()
    value = hash(token)
    return value


def stamp():
    now = time.time()
    nanos = time.time_ns()
    return now, nanos


def names_of(items):
    seen = set(items)
    names = [item.name for item in seen]
    return sorted(names)


def index_of(items):
    table = {}
    for position, item in enumerate(items):
        table[item] = position
    return len(table)


def weak_name(obj):
    ref = weakref.ref(obj)
    alive = ref() is not None
    return alive, repr(ref)


def roll(n):
    draws = [random.randint(1, 6) for _ in range(n)]
    return sum(draws)


def total(values):
    acc = 0
    for v in values:
        acc += v
    return acc


def wander():
    """Takes a path of its own on every run: 32 branches decided by the system's random bytes."""
    steps = 0
    for b in os.urandom(32):
        if b & 1:
            steps = total([steps, b])
        else:
            steps -= 1
    return steps
