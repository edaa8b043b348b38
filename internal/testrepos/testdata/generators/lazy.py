"""Lazy helpers: generator functions, map and filter objects, an iterator class."""

import asyncio
from contextlib import contextmanager


def squares(n):
    for i in range(n):
        yield i * i


def countdown(n):
    while n > 0:
        yield n
        n -= 1
    return "liftoff"


def naturals(start):
    i = start
    while True:
        yield i
        i += 1


def chunks(items, size):
    for i in range(0, len(items), size):
        yield items[i:i + size]


def evens(xs):
    return filter(lambda x: x % 2 == 0, xs)


def scaled(xs, k):
    return map(lambda x: x * k, xs)


class Fib:
    def __init__(self, limit):
        self.a, self.b, self.limit = 0, 1, limit

    def __iter__(self):
        return self

    def __next__(self):
        if self.b > self.limit:
            raise StopIteration
        self.a, self.b = self.b, self.a + self.b
        return self.a


def fib(limit):
    return Fib(limit)


async def plus_one(x):
    await asyncio.sleep(0)
    return x + 1


@contextmanager
def tagged(name):
    yield "<" + name + ">"
