"""A tiny tokenizer for arithmetic expressions, and an evaluator over its tokens."""
from typing import List, NamedTuple


class TokenizeError(ValueError):
    pass


class Token(NamedTuple):
    kind: str
    text: str
    pos: int


OPS = "+-*/()"


def tokenize(src: str) -> List[tuple]:
    """
    >>> [t[0] for t in tokenize("1 + x*2")]
    ['num', 'op', 'name', 'op', 'num']
    """
    out = []
    i = 0
    while i < len(src):
        c = src[i]
        if c.isspace():
            i += 1
        elif c.isdigit():
            j = i
            while j < len(src) and (src[j].isdigit() or src[j] == "."):
                j += 1
            out.append(("num", src[i:j], i))
            i = j
        elif c.isalpha() or c == "_":
            j = i
            while j < len(src) and (src[j].isalnum() or src[j] == "_"):
                j += 1
            out.append(("name", src[i:j], i))
            i = j
        elif c in OPS:
            out.append(("op", c, i))
            i += 1
        else:
            raise TokenizeError("unexpected %r at %d" % (c, i))
    return out


def to_rpn(src: str) -> List[str]:
    prec = {"+": 1, "-": 1, "*": 2, "/": 2}
    out, stack = [], []
    for kind, text, _ in tokenize(src):
        if kind in ("num", "name"):
            out.append(text)
        elif text == "(":
            stack.append(text)
        elif text == ")":
            while stack and stack[-1] != "(":
                out.append(stack.pop())
            if not stack:
                raise TokenizeError("unbalanced )")
            stack.pop()
        else:
            while stack and stack[-1] != "(" and prec[stack[-1]] >= prec[text]:
                out.append(stack.pop())
            stack.append(text)
    while stack:
        op = stack.pop()
        if op == "(":
            raise TokenizeError("unbalanced (")
        out.append(op)
    return out


def eval_rpn(tokens, env=None):
    env = env or {}
    stack = []
    for t in tokens:
        if t in ("+", "-", "*", "/"):
            if len(stack) < 2:
                raise TokenizeError("stack underflow")
            b, a = stack.pop(), stack.pop()
            if t == "+":
                stack.append(a + b)
            elif t == "-":
                stack.append(a - b)
            elif t == "*":
                stack.append(a * b)
            else:
                stack.append(a / b)
        elif t[0].isdigit():
            stack.append(float(t) if "." in t else int(t))
        else:
            stack.append(env[t])
    if len(stack) != 1:
        raise TokenizeError("leftover values")
    return stack[0]


def evaluate(src: str, env: dict = None):
    return eval_rpn(to_rpn(src), env)
