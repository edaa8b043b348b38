"""Small text helpers, documented by examples.

>>> shout("hi")
'HI!'
"""


def shout(text):
    """Upper-case text and add an exclamation mark.

    >>> shout("hello")
    'HELLO!'
    """
    loud = text.upper()
    return loud + "!"


def pad(text, width):
    """Centre text in a field of width, padded with dots.

    >>> pad("ab", 6)
    '..ab..'
    >>> pad("abc", 2)
    'abc'
    """
    if len(text) >= width:
        return text
    left = (width - len(text)) // 2
    right = width - len(text) - left
    return "." * left + text + "." * right
