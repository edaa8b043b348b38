"""Roman numerals (an ndtrace test fixture)."""

NUMERALS = [(1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
            (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I")]


def to_roman(n):
    if not 0 < n < 4000:
        raise ValueError("out of range: %d" % n)
    out = []
    for value, letters in NUMERALS:
        while n >= value:
            out.append(letters)
            n -= value
    return "".join(out)


def from_roman(text):
    total = 0
    i = 0
    for value, letters in NUMERALS:
        while text.startswith(letters, i):
            total += value
            i += len(letters)
    if i != len(text):
        raise ValueError("not a roman numeral: %r" % text)
    return total
