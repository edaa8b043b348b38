"""Small statistics over sequences of numbers."""
from typing import List, Optional, Sequence


def mean(xs: Sequence[float]) -> float:
    if not xs:
        raise ValueError("mean of empty data")
    return sum(xs) / len(xs)


def median(xs: List[float]) -> Optional[float]:
    if not xs:
        return None
    s = sorted(xs)
    mid = len(s) // 2
    if len(s) % 2:
        return s[mid]
    return (s[mid - 1] + s[mid]) / 2


def variance(xs: List[float], sample: bool = False) -> float:
    n = len(xs)
    if n < 2:
        raise ValueError("need two values")
    m = mean(xs)
    ss = sum((x - m) ** 2 for x in xs)
    return ss / (n - 1 if sample else n)


def mode(values):
    counts = {}
    for v in values:
        counts[v] = counts.get(v, 0) + 1
    best = max(counts.values())
    return sorted(k for k, c in counts.items() if c == best)


def clamp(x: float, lo: float, hi: float) -> float:
    if lo > hi:
        raise ValueError("lo > hi")
    return max(lo, min(hi, x))


def normalize(xs: List[float]) -> List[float]:
    lo, hi = min(xs), max(xs)
    if lo == hi:
        return [0.0 for _ in xs]
    return [(x - lo) / (hi - lo) for x in xs]


def running_total(xs):
    total, out = 0, []
    for x in xs:
        total += x
        out.append(total)
    return out


def histogram(xs: List[int], bins: int = 4) -> List[int]:
    if bins <= 0:
        raise ValueError("bins must be positive")
    if not xs:
        return [0] * bins
    lo, hi = min(xs), max(xs)
    width = (hi - lo) / bins or 1
    out = [0] * bins
    for x in xs:
        i = min(int((x - lo) / width), bins - 1)
        out[i] += 1
    return out
