"""Identifier case conversions."""


def snake_to_camel(name, upper_first=False):
    """
    >>> snake_to_camel("hello_big_world")
    'helloBigWorld'
    """
    parts = [p for p in name.split("_") if p]
    if not parts:
        return ""
    head = parts[0].capitalize() if upper_first else parts[0].lower()
    return head + "".join(p.capitalize() for p in parts[1:])


def camel_to_snake(name: str) -> str:
    out = []
    for i, c in enumerate(name):
        if c.isupper():
            if i and (not name[i - 1].isupper() or
                      (i + 1 < len(name) and name[i + 1].islower())):
                out.append("_")
            out.append(c.lower())
        else:
            out.append(c)
    return "".join(out)


def kebab(words):
    return "-".join(w.lower() for w in words if w)


def split_identifier(ident: str) -> list:
    if not ident.isidentifier():
        raise ValueError("not an identifier: %r" % ident)
    if "_" in ident:
        return [p for p in ident.split("_") if p]
    return camel_to_snake(ident).split("_")
