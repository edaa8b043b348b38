"""Small arithmetic helpers (an ndtrace test fixture)."""


def clamp(x, lo, hi):
    if x < lo:
        return lo
    if x > hi:
        return hi
    return x


def total(xs):
    s = 0
    for x in xs:
        s += x
    return s


def mean(xs):
    if not xs:
        raise ValueError("mean of an empty list")
    return total(xs) / len(xs)


def primes_below(n):
    found = []
    for k in range(2, n):
        is_prime = True
        for p in found:
            if p * p > k:
                break
            if k % p == 0:
                is_prime = False
                break
        if is_prime:
            found.append(k)
    return found


class Counter:
    def __init__(self, start=0):
        self.value = start

    def add(self, n):
        self.value += n
        return self.value
