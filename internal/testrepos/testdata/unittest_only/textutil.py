"""Text helpers (an ndtrace test fixture)."""


def word_count(text):
    counts = {}
    for word in text.split():
        word = word.lower().strip(".,!?")
        if word:
            counts[word] = counts.get(word, 0) + 1
    return counts


def title_case(text):
    return " ".join(w[:1].upper() + w[1:] for w in text.split())


class Stack:
    def __init__(self):
        self.items = []

    def push(self, x):
        self.items.append(x)

    def pop(self):
        if not self.items:
            raise IndexError("pop from an empty stack")
        return self.items.pop()
