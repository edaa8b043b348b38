def midpoint(a, b):
    x = (a[0] + b[0]) / 2
    y = (a[1] + b[1]) / 2
    return (x, y)


def manhattan(a, b):
    total = 0
    for p, q in zip(a, b):
        total += abs(p - q)
    return total
