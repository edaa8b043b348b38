def add(a, b):
    total = a + b
    return total


def scale(values, factor):
    return [v * factor for v in values]
