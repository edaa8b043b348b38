# ndtrace's built-in function-level examples, written for the project. Each function is traced
# with the calls listed in examples.go.

def running_max(xs):
    best = None
    out = []
    for x in xs:
        if best is None or x > best:
            best = x
        out.append(best)
    return out


def word_lengths(text):
    counts = {}
    for word in text.split():
        n = len(word)
        counts[n] = counts.get(n, 0) + 1
    return sorted(counts.items())


def collatz_steps(n):
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


def gcd(a, b):
    if b == 0:
        return a
    return gcd(b, a % b)


def caesar(text, shift):
    out = []
    for ch in text:
        if ch.isalpha():
            base = ord('a') if ch.islower() else ord('A')
            ch = chr((ord(ch) - base + shift) % 26 + base)
        out.append(ch)
    return ''.join(out)


def safe_ratio(a, b):
    try:
        return a / b
    except ZeroDivisionError:
        return None


def parse_pairs(text):
    pairs = []
    for part in text.split(','):
        key, value = part.split('=')
        pairs.append((key.strip(), int(value)))
    return dict(pairs)


def fib_gen(n):
    a, b = 0, 1
    for _ in range(n):
        yield a
        a, b = b, a + b


def first_fibs(n):
    return [x for x in fib_gen(n) if x % 2 == 0]
