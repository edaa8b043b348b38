"""Loop helpers (an ndtrace test fixture)."""


def countdown(n):
    steps = []
    while n > 0:
        steps.append(n)
        n -= 1
    return steps
