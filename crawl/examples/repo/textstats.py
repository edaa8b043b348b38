"""Small text statistics: ndtrace's built-in example repository (written for the project)."""


def normalize(word):
    out = []
    for ch in word.lower():
        if ch.isalnum():
            out.append(ch)
    return "".join(out)


def words(text):
    result = []
    for raw in text.split():
        w = normalize(raw)
        if w:
            result.append(w)
    return result


def word_counts(text):
    counts = {}
    for w in words(text):
        counts[w] = counts.get(w, 0) + 1
    return counts


def most_common(text, n):
    counts = word_counts(text)
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return [w for w, _ in ranked[:n]]


def caesar(text, shift):
    out = []
    for ch in text:
        if "a" <= ch <= "z":
            out.append(chr((ord(ch) - 97 + shift) % 26 + 97))
        else:
            out.append(ch)
    return "".join(out)


class Histogram:
    def __init__(self, width):
        self.width = width
        self.bars = {}

    def add(self, label, value):
        self.bars[label] = self.bars.get(label, 0) + value
        return self.bars[label]

    def render(self):
        top = max(self.bars.values())
        lines = []
        for label in sorted(self.bars):
            n = self.bars[label] * self.width // top
            lines.append(f"{label:>6} {'#' * n}")
        return "\n".join(lines)
