"""A class whose repr has a side effect (an ndtrace test fixture)."""

import sys


class Noisy:
    reprs = 0

    def __init__(self, n):
        self.n = n

    def __repr__(self):
        Noisy.reprs += 1
        return f"Noisy({self.n})"


def double(x):
    y = x * 2
    return y


def traced_now():
    return sys.gettrace() is not None
