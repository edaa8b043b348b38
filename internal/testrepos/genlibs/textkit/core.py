"""String helpers: slugs, titles, wrapping, counting."""
import re

_SMALL = {"a", "an", "and", "the", "of", "in", "on", "to", "for"}


def slugify(text, sep="-"):
    """A URL slug of text.

    >>> slugify("Hello, World!")
    'hello-world'
    >>> slugify("  Many   spaces ", sep="_")
    'many_spaces'
    """
    text = text.lower().strip()
    text = re.sub(r"[^a-z0-9]+", sep, text)
    return text.strip(sep)


def title_case(s):
    """Title case that keeps small words lower (but not the first).

    >>> title_case("the lord of the rings")
    'The Lord of the Rings'
    """
    words = s.split()
    out = []
    for i, w in enumerate(words):
        if i > 0 and w.lower() in _SMALL:
            out.append(w.lower())
        else:
            out.append(w[:1].upper() + w[1:].lower())
    return " ".join(out)


def wrap(text, width=20):
    lines, line = [], ""
    for word in text.split():
        if len(word) > width:
            if line:
                lines.append(line)
                line = ""
            while len(word) > width:
                lines.append(word[:width])
                word = word[width:]
        if not line:
            line = word
        elif len(line) + 1 + len(word) <= width:
            line += " " + word
        else:
            lines.append(line)
            line = word
    if line:
        lines.append(line)
    return lines


def count_words(text: str) -> dict:
    counts = {}
    for w in re.findall(r"[a-z']+", text.lower()):
        counts[w] = counts.get(w, 0) + 1
    return counts


def is_palindrome(s: str, ignore_case: bool = True) -> bool:
    """
    >>> is_palindrome("Racecar")
    True
    """
    chars = [c for c in s if c.isalnum()]
    if ignore_case:
        chars = [c.lower() for c in chars]
    return chars == chars[::-1]


def truncate(s: str, n: int, ellipsis: str = "...") -> str:
    if n < 0:
        raise ValueError("n must be >= 0")
    if len(s) <= n:
        return s
    if n <= len(ellipsis):
        return s[:n]
    return s[: n - len(ellipsis)] + ellipsis


def common_prefix(words):
    if not words:
        return ""
    prefix = words[0]
    for w in words[1:]:
        while not w.startswith(prefix):
            prefix = prefix[:-1]
            if not prefix:
                return ""
    return prefix


def rot13(s: str) -> str:
    out = []
    for c in s:
        if "a" <= c <= "z":
            out.append(chr((ord(c) - 97 + 13) % 26 + 97))
        elif "A" <= c <= "Z":
            out.append(chr((ord(c) - 65 + 13) % 26 + 65))
        else:
            out.append(c)
    return "".join(out)


def levenshtein(a: str, b: str) -> int:
    if len(a) < len(b):
        a, b = b, a
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i]
        for j, cb in enumerate(b, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb)))
        prev = cur
    return prev[-1]


def center_pad(s, width, fill="*"):
    if len(fill) != 1:
        raise ValueError("fill must be one character")
    total = width - len(s)
    if total <= 0:
        return s
    left = total // 2
    return fill * left + s + fill * (total - left)


def indent_block(text, prefix="    ", skip_blank=True):
    out = []
    for line in text.splitlines():
        if skip_blank and not line.strip():
            out.append(line)
        else:
            out.append(prefix + line)
    return "\n".join(out)


def initials(name):
    parts = [p for p in name.replace("-", " ").split() if p]
    return "".join(p[0].upper() + "." for p in parts)
