"""An ini-file parser: sections, keys, comments and continuation lines."""


class IniError(Exception):
    def __init__(self, lineno, msg):
        super().__init__("line %d: %s" % (lineno, msg))
        self.lineno = lineno


def parse_ini(text, comment_chars="#;"):
    """Parse ini text into {section: {key: value}}.

    >>> parse_ini("[a]\\nx = 1\\n")
    {'a': {'x': '1'}}
    """
    result = {}
    section = None
    last_key = None
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not line.strip() or line.lstrip()[0] in comment_chars:
            continue
        if raw[0] in " \t" and last_key is not None:
            result[section][last_key] += "\n" + line.strip()
            continue
        if line.startswith("["):
            if not line.endswith("]"):
                raise IniError(lineno, "unterminated section header")
            section = line[1:-1].strip()
            if not section:
                raise IniError(lineno, "empty section name")
            result.setdefault(section, {})
            last_key = None
            continue
        if section is None:
            raise IniError(lineno, "key outside a section")
        for sep in ("=", ":"):
            if sep in line:
                key, _, value = line.partition(sep)
                break
        else:
            raise IniError(lineno, "expected key = value")
        key = key.strip().lower()
        result[section][key] = value.strip()
        last_key = key
    return result


def to_bool(value: str) -> bool:
    v = value.strip().lower()
    if v in ("1", "yes", "true", "on"):
        return True
    if v in ("0", "no", "false", "off"):
        return False
    raise ValueError("not a boolean: %r" % value)


def dump_ini(data: dict) -> str:
    lines = []
    for section in sorted(data):
        lines.append("[%s]" % section)
        for key, value in sorted(data[section].items()):
            lines.append("%s = %s" % (key, str(value).replace("\n", "\n    ")))
        lines.append("")
    return "\n".join(lines)


def get_typed(data, section, key, default=None):
    try:
        raw = data[section][key]
    except KeyError:
        return default
    if raw.isdigit():
        return int(raw)
    try:
        return float(raw)
    except ValueError:
        pass
    try:
        return to_bool(raw)
    except ValueError:
        return raw


def split_list(value: str, sep: str = ",") -> list:
    return [p.strip() for p in value.split(sep) if p.strip()]


class Config:
    def __init__(self, text=""):
        self.data = parse_ini(text) if text else {}

    def get(self, section, key, default=None):
        return get_typed(self.data, section, key, default)

    def set(self, section, key, value):
        if not section or not key:
            raise IniError(0, "empty section or key")
        self.data.setdefault(section, {})[key] = str(value)
        return self.data[section][key]

    def sections(self):
        return sorted(self.data)
