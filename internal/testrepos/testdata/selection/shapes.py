"""Shapes (an ndtrace test fixture)."""


def area(kind, *sizes):
    if kind == "square":
        return sizes[0] * sizes[0]
    if kind == "rect":
        return sizes[0] * sizes[1]
    raise ValueError("unknown shape: " + kind)


def stress(n):
    total = 0
    for i in range(n):
        total += area("rect", i, i + 1)
    return total
