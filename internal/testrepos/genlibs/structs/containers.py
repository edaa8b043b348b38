"""A stack, a queue, intervals, colours and points."""
import enum
from dataclasses import dataclass, field
from typing import List, Optional


class EmptyError(Exception):
    """Raised when taking from an empty container."""


class Stack:
    def __init__(self, items=None):
        self.items = list(items or [])

    def push(self, x):
        self.items.append(x)
        return len(self.items)

    def pop(self):
        if not self.items:
            raise EmptyError("pop from empty stack")
        return self.items.pop()

    def peek(self):
        if not self.items:
            return None
        return self.items[-1]

    def __len__(self):
        return len(self.items)

    def __repr__(self):
        return "Stack(%r)" % (self.items,)


class Queue:
    def __init__(self, capacity: int = 8):
        if capacity <= 0:
            raise ValueError("capacity must be positive")
        self.capacity = capacity
        self.items: List[int] = []

    def put(self, x: int) -> bool:
        if len(self.items) >= self.capacity:
            return False
        self.items.append(x)
        return True

    def put_all(self, xs: List[int]) -> int:
        n = 0
        for x in xs:
            if not self.put(x):
                break
            n += 1
        return n

    def get(self) -> int:
        if not self.items:
            raise EmptyError("get from empty queue")
        return self.items.pop(0)


@dataclass
class Interval:
    lo: int
    hi: int

    def __post_init__(self):
        if self.lo > self.hi:
            raise ValueError("lo > hi")

    def length(self) -> int:
        return self.hi - self.lo

    def contains(self, x: int) -> bool:
        return self.lo <= x <= self.hi

    def overlaps(self, lo: int, hi: int) -> bool:
        return not (hi < self.lo or lo > self.hi)

    def clamp(self, x: int) -> int:
        if x < self.lo:
            return self.lo
        if x > self.hi:
            return self.hi
        return x

    @staticmethod
    def merge_all(pairs: List[List[int]]) -> List[List[int]]:
        out: List[List[int]] = []
        for lo, hi in sorted(pairs):
            if out and lo <= out[-1][1]:
                out[-1][1] = max(out[-1][1], hi)
            else:
                out.append([lo, hi])
        return out

    @classmethod
    def parse(cls, text: str) -> "Interval":
        lo, sep, hi = text.partition("..")
        if not sep:
            raise ValueError("expected lo..hi")
        return cls(int(lo), int(hi))


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"
    BLUE = "blue"

    @classmethod
    def from_name(cls, name: str) -> "Color":
        try:
            return cls[name.upper()]
        except KeyError:
            raise ValueError("unknown colour %r" % name) from None

    def hex(self):
        return {"red": "#ff0000", "green": "#00ff00", "blue": "#0000ff"}[self.value]


@dataclass
class Point:
    x: float = 0.0
    y: float = 0.0
    tags: List[str] = field(default_factory=list)

    def manhattan(self, other_x: float, other_y: float) -> float:
        return abs(self.x - other_x) + abs(self.y - other_y)

    def quadrant(self) -> Optional[int]:
        if self.x == 0 or self.y == 0:
            return None
        if self.x > 0:
            return 1 if self.y > 0 else 4
        return 2 if self.y > 0 else 3

    def tagged(self, tag: str) -> List[str]:
        if tag in self.tags:
            return self.tags
        return self.tags + [tag]


def flatten(nested):
    out = []
    for x in nested:
        if isinstance(x, (list, tuple)):
            out.extend(flatten(x))
        else:
            out.append(x)
    return out


def group_by_len(words):
    groups = {}
    for w in words:
        groups.setdefault(len(w), []).append(w)
    return groups


def chunk(xs, size):
    if size <= 0:
        raise ValueError("size must be positive")
    return [xs[i:i + size] for i in range(0, len(xs), size)]


def dedupe(items):
    seen, out = set(), []
    for x in items:
        if x not in seen:
            seen.add(x)
            out.append(x)
    return out
