"""Part 7 of 8: the input generator (issue 30).

_gen_main(req, load_module) finds the functions and methods of one module (req["function"] == "")
or generates inputs for one of them: doctests, defaults and calls elsewhere in the module, values
from annotations (own tables, then Hypothesis's from_type when it is importable), values guessed
from parameter names and uses, then coverage-guided mutation (line events of the unit's own code
objects through sys.settrace).  A candidate is kept when it reaches lines no kept input reached,
runs twice alike and renders as a call whose arguments are Python literals.

It runs inside the item process of a "generate" run (the traced code's process: everything here
is the module's to disturb) and standalone (exec'd by internal/genyield/harness.py), so it uses
only stdlib modules it imports itself and every top-level name it defines starts with _gen.  The
returned dict is checked and capped by Go; here every unit of work is bounded by a time budget,
an interval timer, a line-event cap and a recursion limit, and caught as BaseException.
"""
import ast
import builtins
import itertools
import random
import re
import signal
import sys
import time
import types



class _gen_Lazy:
    """The modules only generation needs (inspect, typing, doctest: doctest imports pdb and bdb),
    imported when a generate run starts, never when the tracer loads."""

    def load(self):
        import doctest as d
        import inspect as i
        import typing as t
        self.doctest, self.inspect, self.typing = d, i, t


_gen_mods = _gen_Lazy()


class _gen_P:
    """inspect.Parameter's kinds, without importing inspect when the tracer loads."""
    POSITIONAL_ONLY, POSITIONAL_OR_KEYWORD, VAR_POSITIONAL, KEYWORD_ONLY, VAR_KEYWORD = range(5)

# What the module under test may replace: taken before it runs, put back after every run.
_gen_B = dict(builtins.__dict__)
_gen_settrace = sys.settrace
_gen_gettrace = sys.gettrace
_gen_setitimer = signal.setitimer
_gen_signal = signal.signal
_gen_getsignal = signal.getsignal
# The generator's budgets count CPU time, not wall time: what a function keeps must not depend on
# how loaded the worker is (the same spec gives the same shards). Wall time only bounds what burns
# no CPU (a sleep), with margins a loaded worker stays within.
_gen_monotonic = time.process_time
_gen_wall = time.monotonic
_gen_literal_eval = ast.literal_eval
_gen_parse = ast.parse
_gen_seed = random.seed
_gen_setrlimit = sys.setrecursionlimit
_gen_getrlimit = sys.getrecursionlimit

_gen_MAX_FUNCTIONS = 5000
_gen_MAX_PARAMS = 8
_gen_CALL_MAX = 4096
_gen_RUN_S = 0.2           # one candidate's CPU time
_gen_RUN_WALL_S = 2.0      # one candidate's wall time (what sleeps)
_gen_EVENTS_MAX = 200000   # line events per candidate run
_gen_SEQ_MAX = 4000        # line sequence kept for the determinism check
_gen_SIG_MAX = 2000        # result repr kept for the determinism check
_gen_ITER_MAX = 8          # values taken from a generator (as the tracer does)
_gen_NO_PROGRESS = 80      # attempts without new lines before mutation gives up
_gen_ADDR_RE = re.compile(r" at 0x[0-9a-fA-F]+")
_gen_NOKEEP_EXC = ("TypeError", "AttributeError", "RecursionError", "MemoryError", "NameError",
                   "UnboundLocalError", "SystemError", "_gen_Timeout", "NotImplementedError")
# dunder methods that are no unit (called by the language, not by a call of their own)
_gen_DUNDER_SKIP = {"__init__", "__new__", "__del__", "__init_subclass__", "__class_getitem__",
                    "__getattr__", "__getattribute__", "__setattr__", "__delattr__",
                    "__set_name__", "__get__", "__set__", "__delete__", "__enter__", "__exit__",
                    "__aenter__", "__aexit__", "__await__", "__aiter__", "__anext__",
                    "__reduce__", "__reduce_ex__", "__getstate__", "__setstate__", "__copy__",
                    "__deepcopy__", "__subclasshook__", "__instancecheck__",
                    "__subclasscheck__", "__prepare__", "__post_init__", "__getnewargs__",
                    "__getnewargs_ex__", "__dir__", "__sizeof__", "__hash__", "__iter__",
                    "__next__"}
_gen_IO_ROOTS = {"os", "socket", "subprocess", "requests", "urllib", "urllib2", "urllib3",
                 "shutil", "http", "httplib", "ftplib", "smtplib", "tempfile", "glob", "pathlib",
                 "asyncio", "multiprocessing", "sqlite3", "webbrowser", "select",
                 "selectors", "fcntl", "pty", "telnetlib", "poplib", "imaplib", "ssl"}
_gen_IO_PURE = {"os.path.join", "os.path.split", "os.path.splitext", "os.path.basename",
                "os.path.dirname", "os.path.normpath", "os.path.normcase", "os.path.isabs",
                "os.path.commonprefix", "os.path.splitdrive", "os.fspath", "os.fsencode",
                "os.fsdecode", "os.environ.get", "os.getenv", "os.path.relpath", "os.sep",
                "os.linesep", "os.pathsep", "os.path.expanduser", "os.path.commonpath",
                "os.getpid", "os.cpu_count", "os.get_terminal_size"}
_gen_IO_NAMES = {"open", "input", "breakpoint", "exit", "quit"}
# method names that are I/O whoever owns them (unlink, touch, connect are too common to tell)
_gen_IO_METHODS = {"write_text", "write_bytes", "read_text", "read_bytes", "mkdir", "rmdir",
                   "urlopen", "sendall", "makedirs", "iterdir", "rglob"}
_gen_STR_METHODS = {"split", "rsplit", "splitlines", "lower", "upper", "strip", "lstrip", "rstrip",
                    "startswith", "endswith", "replace", "find", "rfind", "isdigit", "isalpha",
                    "isalnum", "isspace", "isupper", "islower", "title", "capitalize", "encode",
                    "format", "partition", "rpartition", "casefold", "zfill", "center", "ljust",
                    "rjust", "expandtabs", "translate", "isidentifier", "isnumeric", "isdecimal",
                    "swapcase", "removeprefix", "removesuffix"}
_gen_LIST_METHODS = {"append", "extend", "insert", "sort", "remove", "reverse"}
_gen_DICT_METHODS = {"items", "keys", "values", "get", "setdefault", "update", "popitem"}
_gen_NAME_TAGS = [
    (re.compile(r"^(s|st|str|string|text|txt|name|word|line|char|ch|c|prefix|suffix|sep|"
                r"delim|delimiter|pattern|fmt|format|path|filename|fname|key|label|title|"
                r"msg|message|token|tok|src|source|sql|query|url|host|domain|code|ident|"
                r"identifier|tag|sentence|value_str|encoding|label)$|_(str|name|text|string|"
                r"line|word|path|prefix|suffix|sep|char)$|^(str|text|name|word|line)_"), "str"),
    (re.compile(r"^(n|i|j|k|m|count|size|num|number|idx|index|length|len|width|height|depth|"
                r"level|limit|start|stop|end|step|times|base|offset|pos|position|year|month|"
                r"day|hour|minute|second|port|digits|precision|radix|lo|hi|low|high|"
                r"bits|nbits|total|maxsize|max_size|capacity|amount|a|b|p|q|seed|ndigits)$|"
                r"^(n|num|max|min)_|_(count|size|num|len|index|idx|width|limit|number|n)$"),
     "int"),
    (re.compile(r"^(x|y|z|f|val|value|v|r|rate|ratio|factor|scale|weight|alpha|beta|eps|"
                r"epsilon|tol|tolerance|temperature|temp|prob|probability|percent|amount)$"),
     "num"),
    (re.compile(r"^(xs|ys|items|lst|list|arr|array|values|vals|seq|sequence|elements|elems|"
                r"nums|numbers|iterable|it|iterables|data|args|coll|collection|words|lines|"
                r"tokens|parts|names|keys|pieces|rows|matrix|grid|nodes|points|edges|stack|"
                r"queue|heap|pairs|entries|chunks|strings|ints)$|s$"), "list"),
    (re.compile(r"^(d|dct|dict|mapping|map|m|mp|table|kwargs|options|opts|config|cfg|params|"
                r"attrs|headers|env|counts|freq|lookup|index_map|obj|json|record)$|_(map|dict)$"),
     "dict"),
    (re.compile(r"^(flag|is_[a-z_]*|has_[a-z_]*|should_[a-z_]*|use_[a-z_]*|enable[a-z_]*|"
                r"strict|verbose|reverse|recursive|force|quiet|debug|inclusive|ignore_case|"
                r"case_sensitive|allow_[a-z_]*|keep_[a-z_]*|dry_run|bool)$"), "bool"),
    (re.compile(r"^(b|data_bytes|buf|buffer|raw|payload|blob|byte_string|bytes)$"), "bytes"),
]


class _gen_Timeout(BaseException):
    """Raised inside a candidate whose time is up (signal handler, line tracer)."""


class _gen_Sink:
    """stdout/stderr while a candidate runs: keeps nothing, costs nothing."""
    encoding = "utf-8"
    errors = "replace"

    def write(self, s):
        return len(s) if type(s) is str else 0

    def writelines(self, lines):
        return None

    def flush(self):
        return None

    def isatty(self):
        return False

    def fileno(self):
        raise OSError("no file descriptor")


_gen_state = {"armed": False, "wall_deadline": float("inf")}


def _gen_alarm(signum, frame):
    if _gen_state["armed"]:
        raise _gen_Timeout()


def _gen_fix_builtins():
    """Puts back the builtins a candidate replaced, added or removed (using none of them)."""
    d = builtins.__dict__
    for k, v in _gen_B.items():
        if d.get(k, d) is not v:
            d[k] = v
    for k in [k for k in d if k not in _gen_B]:
        d.pop(k, None)


def _gen_restore(saved):
    """Puts back what a candidate may have replaced: builtins, standard streams, tracing,
    the timer and the recursion limit."""
    _gen_state["armed"] = False
    try:
        _gen_setitimer(signal.ITIMER_PROF, 0, 0)
        _gen_setitimer(signal.ITIMER_REAL, 0, 0)
    except BaseException:
        pass
    try:
        _gen_settrace(None)
    except BaseException:
        pass
    _gen_fix_builtins()
    for name, v in saved.items():
        try:
            if name == "sigalrm":
                _gen_signal(signal.SIGALRM, v)
            elif name == "sigprof":
                _gen_signal(signal.SIGPROF, v)
            elif name == "recursion":
                _gen_setrlimit(v)
            else:
                setattr(sys, name, v)
        except BaseException:
            pass


def _gen_guarded(fn, seconds, *args):
    """fn(*args) under interval timers (raising _gen_Timeout in it): seconds of CPU time
    (ITIMER_PROF), and for what burns none, _gen_RUN_WALL_S or more of wall time, never past the
    run's wall deadline; streams and builtins put back afterwards. Returns (ok,
    value_or_exception)."""
    saved = {"stdout": sys.stdout, "stderr": sys.stderr, "stdin": sys.stdin,
             "sigalrm": _gen_getsignal(signal.SIGALRM), "sigprof": _gen_getsignal(signal.SIGPROF),
             "recursion": _gen_getrlimit()}
    try:
        try:
            sys.stdout = sys.stderr = _gen_Sink()
            _gen_signal(signal.SIGALRM, _gen_alarm)
            _gen_signal(signal.SIGPROF, _gen_alarm)
            _gen_state["armed"] = True
            wall = min(max(_gen_RUN_WALL_S, 10 * seconds), _gen_state["wall_deadline"] - _gen_wall())
            _gen_setitimer(signal.ITIMER_REAL, max(wall, 0.001), 0.02)
            _gen_setitimer(signal.ITIMER_PROF, max(seconds, 0.001), 0.02)
            return True, fn(*args)
        finally:
            _gen_restore(saved)
    except BaseException as e:  # noqa: B036 - the module's exceptions are data
        return False, e


# ---------------------------------------------------------------- literals


def _gen_lit_ok(v, depth=0, budget=None):
    """Whether v is made of literal types only, small enough (depth 5, 200 nodes)."""
    if budget is None:
        budget = [200]
    budget[0] -= 1
    if budget[0] < 0 or depth > 5:
        return False
    t = type(v)
    if v is None or t is bool or t is int:
        return t is not int or -(10 ** 30) < v < 10 ** 30
    if t is float:
        return v == v and v not in (float("inf"), float("-inf"))
    if t is str or t is bytes:
        return len(v) <= 1000
    if t is list or t is tuple:
        return all(_gen_lit_ok(x, depth + 1, budget) for x in v)
    if t is set:
        return len(v) > 0 and all(_gen_lit_ok(x, depth + 1, budget) for x in v)
    if t is dict:
        return all(_gen_lit_ok(k, depth + 1, budget) and _gen_lit_ok(x, depth + 1, budget)
                   for k, x in v.items())
    return False


def _gen_repr(v):
    """repr(v) when it round-trips through ast.literal_eval to an equal value, else None."""
    try:
        if not _gen_lit_ok(v):
            return None
        r = repr(v)
        if len(r) > _gen_CALL_MAX:
            return None
        back = _gen_literal_eval(r)
        if back != v or type(back) is not type(v):
            return None
        return r
    except BaseException:
        return None


# ---------------------------------------------------------------- module analysis


def _gen_dotted(node):
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _gen_deco_name(d):
    if isinstance(d, ast.Call):
        d = d.func
    return _gen_dotted(d) or ""


def _gen_needs_io(node, names=frozenset(), aliases=None):
    """Whether node's body calls what reads or writes the world (files, processes, network,
    the terminal, sleeping): a static check. names are bare names that do (imported from such
    modules, or the module's own functions that do); aliases map local module names to theirs."""
    aliases = aliases or {}
    for n in ast.walk(node):
        if isinstance(n, ast.Call):
            f = n.func
            if isinstance(f, ast.Name) and (f.id in _gen_IO_NAMES or f.id in names):
                return True
            name = _gen_dotted(f)
            if name:
                head, _, rest = name.partition(".")
                if head in aliases:
                    name = aliases[head] + ("." + rest if rest else "")
                root = name.split(".")[0]
                if root in _gen_IO_ROOTS and name not in _gen_IO_PURE and "." in name:
                    return True
                if name in ("time.sleep", "sys.exit", "os._exit", "sys.stdin.read",
                            "sys.stdin.readline"):
                    return True
            if isinstance(f, ast.Attribute) and f.attr in _gen_IO_METHODS:
                return True
        elif isinstance(n, ast.Attribute) and _gen_dotted(n) in ("sys.stdin", "sys.argv"):
            return True
    return False


def _gen_io_functions(tree, defs):
    """The module-level functions that need I/O, directly or through other functions of the
    module (a fixed point over their calls by name), with the names imported from I/O modules."""
    names, aliases = set(), {}
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
            root = n.module.split(".")[0]
            for a in n.names:
                full = n.module + "." + a.name
                if root in _gen_IO_ROOTS and full not in _gen_IO_PURE:
                    names.add(a.asname or a.name)
        elif isinstance(n, ast.Import):
            for a in n.names:
                if a.asname:
                    aliases[a.asname] = a.name
    funcs = {node.name: node for node, cls in defs
             if cls is None and isinstance(node, ast.FunctionDef)}
    calls = {}
    for name, node in funcs.items():
        calls[name] = {c.func.id for c in ast.walk(node)
                       if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)
                       and c.func.id in funcs}
    io = {name for name, node in funcs.items() if _gen_needs_io(node, names, aliases)}
    for _ in range(64):
        more = {name for name, called in calls.items() if name not in io and called & io}
        if not more:
            break
        io |= more
    return io | names, aliases


def _gen_is_abstract_body(node):
    body = list(node.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    if len(body) != 1:
        return False
    s = body[0]
    if isinstance(s, ast.Raise) and s.exc is not None:
        e = s.exc.func if isinstance(s.exc, ast.Call) else s.exc
        return isinstance(e, ast.Name) and e.id == "NotImplementedError"
    return False


def _gen_defs(tree):
    """Top-level function and class definitions (also inside module-level if/try blocks), in
    source order: [(node, class_node_or_None)]."""
    out = []

    def walk(stmts, cls):
        for s in stmts:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((s, cls))
            elif isinstance(s, ast.ClassDef) and cls is None:
                out.append((s, None))
                walk(s.body, s)
            elif isinstance(s, ast.If):
                walk(s.body, cls)
                walk(s.orelse, cls)
            elif isinstance(s, ast.Try):
                walk(s.body, cls)
                walk(s.orelse, cls)
                walk(s.finalbody, cls)
                for h in s.handlers:
                    walk(h.body, cls)
            elif isinstance(s, ast.With):
                walk(s.body, cls)
            if len(out) > 4 * _gen_MAX_FUNCTIONS:
                return
    walk(tree.body, None)
    return out


def _gen_first_line(node):
    return min([node.lineno] + [d.lineno for d in node.decorator_list])


def _gen_code_of(obj):
    """The code object behind obj (functions, bound methods, static/class methods, wrappers
    that keep __wrapped__), or None."""
    for _ in range(12):
        if isinstance(obj, (staticmethod, classmethod)):
            obj = obj.__func__
            continue
        if isinstance(obj, types.MethodType):
            obj = obj.__func__
            continue
        if isinstance(obj, types.FunctionType):
            return obj.__code__
        try:
            w = _gen_mods.inspect.getattr_static(obj, "__wrapped__", None)
        except BaseException:
            w = None
        if w is None:
            return None
        obj = w
    return None


def _gen_code_matches(obj, filename, lo, hi):
    co = _gen_code_of(obj)
    return co is not None and co.co_filename == filename and lo <= co.co_firstlineno <= hi


# ---------------------------------------------------------------- the unit


class _gen_Unit:
    """One function or method under generation: its node, kind, code range and call shape."""

    def __init__(self, node, cls_node, kind):
        self.node, self.cls_node, self.kind = node, cls_node, kind
        self.name = node.name
        self.cls = cls_node.name if cls_node is not None else ""
        self.qualname = (self.cls + "." if self.cls else "") + self.name
        self.line, self.end_line = _gen_first_line(node), node.end_lineno or node.lineno


def _gen_kind_and_skip(node, cls_node, io=(frozenset(), None)):
    """(kind, static skip reason) of a def."""
    if cls_node is None:
        kind = "function"
    else:
        kind = "method"
    skip = ""
    for d in node.decorator_list:
        name = _gen_deco_name(d)
        last = name.rsplit(".", 1)[-1]
        if name == "staticmethod":
            kind = "staticmethod" if cls_node is not None else kind
        elif name == "classmethod":
            kind = "classmethod" if cls_node is not None else kind
        elif last in ("property", "cached_property", "setter", "getter", "deleter",
                      "abstractproperty", "lazy_property", "reify"):
            skip = skip or "property"
        elif last in ("abstractmethod", "abstractclassmethod", "abstractstaticmethod"):
            skip = skip or "abstract"
        elif last == "overload":
            skip = skip or "overload"
        elif last in ("contextmanager", "asynccontextmanager"):
            skip = skip or "context_manager"
    if isinstance(node, ast.AsyncFunctionDef):
        return kind, "async"
    if skip:
        return kind, skip
    if node.name.startswith("__") and node.name.endswith("__") and \
            (cls_node is None or node.name in _gen_DUNDER_SKIP):
        return kind, "dunder"
    if _gen_is_abstract_body(node):
        return kind, "abstract"
    a = node.args
    n = len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs)
    if kind in ("method", "classmethod") and n:
        n -= 1
    if kind in ("method", "classmethod") and not (a.posonlyargs or a.args) and not a.vararg:
        return kind, "no_self"
    if n > _gen_MAX_PARAMS:
        return kind, "too_many_parameters"
    if _gen_needs_io(node, io[0], io[1]):
        return kind, "needs_io"
    return kind, ""


class _gen_Module:
    """The module's text, tree and filename, with what is mined from them."""

    def __init__(self, code, filename):
        self.code, self.filename = code, filename
        self.tree = _gen_parse(code, filename)
        self.defs = _gen_defs(self.tree)
        self._strs = self._ints = self._floats = None

    def mine(self):
        if self._strs is None:
            strs, ints, floats = [], [], []
            seen = set()
            for n in ast.walk(self.tree):
                if isinstance(n, ast.Constant):
                    v = n.value
                    key = (type(v), v) if type(v) in (str, int, float, bytes) else None
                    if key is None or key in seen:
                        continue
                    seen.add(key)
                    if type(v) is str and 0 < len(v) <= 64 and len(strs) < 120 \
                            and "\n" not in v.strip("\n"):
                        strs.append(v)
                    elif type(v) is int and -10 ** 5 < v < 10 ** 5 and len(ints) < 60:
                        ints.append(v)
                    elif type(v) is float and v == v and abs(v) < 1e12 and len(floats) < 30:
                        floats.append(v)
            self._strs, self._ints, self._floats = strs, ints, floats
        return self._strs, self._ints, self._floats


def _gen_exec_lines(mod, unit):
    """The unit's executable lines: line starts of its code objects (and nested ones) inside its
    body, the def line and a docstring excluded."""
    node = unit.node
    body = node.body
    first = body[0].lineno if body else node.lineno
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        first = body[1].lineno if len(body) > 1 else (body[0].end_lineno or first) + 1
    lo, hi = unit.line, unit.end_line
    try:
        top = compile(mod.code, mod.filename, "exec", dont_inherit=True)
    except BaseException:
        return []
    lines, todo, seen = set(), [top], 0
    while todo and seen < 100000:
        c = todo.pop()
        seen += 1
        for k in c.co_consts:
            if isinstance(k, types.CodeType):
                todo.append(k)
        if c is top or not (lo <= c.co_firstlineno <= hi):
            continue
        for _, _, ln in c.co_lines():
            if ln is not None and first <= ln <= hi:
                lines.add(ln)
    return sorted(lines)


# ---------------------------------------------------------------- tracing a run


class _gen_Tracer:
    """Line events of the code objects inside [lo, hi] of filename."""

    def __init__(self, filename, lo, hi, deadline):
        self.filename, self.lo, self.hi, self.deadline = filename, lo, hi, deadline
        self.codes = {}
        self.lines = set()
        self.seq = []
        self.n = 0
        self.entered = False

    def glob(self, frame, event, arg):
        if event != "call":
            return None
        co = frame.f_code
        ok = self.codes.get(co)
        if ok is None:
            ok = co.co_filename == self.filename and self.lo <= co.co_firstlineno <= self.hi
            self.codes[co] = ok
        if ok:
            self.entered = True
            return self.local
        return None

    def local(self, frame, event, arg):
        if event == "line":
            ln = frame.f_lineno
            self.lines.add(ln)
            self.n += 1
            if len(self.seq) < _gen_SEQ_MAX:
                self.seq.append(ln)
            if self.n > _gen_EVENTS_MAX or (self.n & 255 == 0 and _gen_monotonic() > self.deadline):
                raise _gen_Timeout()
        return self.local


class _gen_Outcome:
    __slots__ = ("entered", "lines", "seq", "sig", "raised", "timeout", "init_failed")

    def key(self):
        return (self.entered, tuple(self.seq), self.sig, self.raised)


# ---------------------------------------------------------------- values


def _gen_tag_values(tag, mod, rnd):
    """Candidate values for a guessed type tag, typical ones first."""
    strs, ints, floats = mod.mine()
    mstrs = [s for s in strs if len(s) <= 40][:24]
    if tag == "str":
        return ["abc", "hello world", "", "a", "Hello, World!", "  spaced  ", "123", "a-b_c.d",
                "x\ny", "A1 b2 C3"] + mstrs
    if tag == "int":
        return [3, 0, 1, -1, 2, 10, 5, 100, -7, 42, 1000] + ints[:20]
    if tag == "float":
        return [1.5, 0.0, -2.25, 3.0, 0.1, 100.0, 1.0] + floats[:10]
    if tag == "num":
        return [3, 1.5, 0, -1, 2.0, 10, 0.5, 100] + ints[:10] + floats[:5]
    if tag == "bool":
        return [True, False]
    if tag == "bytes":
        return [b"abc", b"", b"hello world", b"\x00\xff", b"123"] + \
            [s.encode("utf-8", "replace") for s in mstrs[:8]]
    if tag == "list":
        return [[1, 2, 3], [], [3, 1, 2], ["a", "b", "c"], [1], [1, 1, 2], [[1, 2], [3, 4]],
                [0, -1, 5, 2], ["abc", "de", ""], [1.5, 2.5]] + \
            ([[s for s in mstrs[:3]]] if mstrs else [])
    if tag == "dict":
        return [{"a": 1, "b": 2}, {}, {"key": "value"}, {"a": {"b": 1}}, {1: "x", 2: "y"},
                {"x": [1, 2]}] + ([{mstrs[0]: 1}] if mstrs else [])
    if tag == "seq":
        return [[1, 2, 3], "abc", [], "", [3, 1, 2], ["a", "b"], "hello world", [1, 1, 2]]
    if tag == "none":
        return [None]
    if tag == "tuple":
        return [(1, 2), (), (1, 2, 3), ("a", 1), (0,)]
    if tag == "set":
        return [{1, 2, 3}, {"a", "b"}, {1}]
    # unknown
    return [1, "abc", [1, 2, 3], None, 2.5, {"a": 1}, b"abc", True, (1, 2), "", 0, -3,
            "hello world", ["a", "b"]] + mstrs[:6] + ints[:6]


def _gen_type_values(t, mod, rnd, depth=0):
    """Candidate values for an annotation, typical first; [] when none is a literal."""
    if depth > 3:
        return []
    if t is None or t is _gen_mods.typing.Any or t is object or \
            t is _gen_mods.inspect.Parameter.empty:
        return None  # untyped: guess
    if isinstance(t, str):
        return None
    if t is type(None):
        return [None]
    simple = {int: "int", float: "float", str: "str", bool: "bool", bytes: "bytes",
              complex: None, list: "list", dict: "dict", tuple: "tuple", set: "set"}
    try:
        if t in simple:
            if t is complex:
                return [1 + 2j, 0j, -1.5j]
            return _gen_tag_values(simple[t], mod, rnd)
    except TypeError:
        pass
    origin = _gen_mods.typing.get_origin(t)
    args = _gen_mods.typing.get_args(t)
    if origin is _gen_mods.typing.Literal:
        return [a for a in args if _gen_repr(a) is not None]
    if origin is _gen_mods.typing.Union or (
            hasattr(types, "UnionType") and origin is types.UnionType):
        parts = [_gen_type_values(a, mod, rnd, depth + 1) for a in args]
        parts = [p if p is not None else _gen_tag_values("any", mod, rnd) for p in parts]
        out = []
        for group in itertools.zip_longest(*parts):
            out.extend(x for x in group if x is not None or type(None) in args)
        seen, uniq = set(), []
        for x in out:
            r = _gen_repr(x)
            if r is not None and r not in seen:
                seen.add(r)
                uniq.append(x)
        return uniq
    if isinstance(t, _gen_mods.typing.TypeVar):
        if t.__constraints__:
            return _gen_type_values(_gen_mods.typing.Union[t.__constraints__], mod, rnd, depth + 1)
        if t.__bound__ is not None:
            return _gen_type_values(t.__bound__, mod, rnd, depth + 1)
        return None
    if isinstance(t, type) and issubclass(t, __import__("enum").Enum):
        return [m.value for m in list(t)[:10] if _gen_repr(m.value) is not None] \
            if issubclass(t, (int, str)) else []
    if isinstance(t, type) and hasattr(t, "_fields"):
        return []
    import collections.abc as cabc
    seqs = (list, _gen_mods.typing.List, cabc.Sequence, cabc.MutableSequence, cabc.Iterable,
            cabc.Collection, cabc.Iterator, cabc.Reversible, cabc.Container)
    sets = (set, frozenset, cabc.Set, cabc.MutableSet)
    maps = (dict, cabc.Mapping, cabc.MutableMapping)
    if origin in seqs or origin in sets:
        elem = _gen_type_values(args[0], mod, rnd, depth + 1) if args else None
        if elem is None:
            elem = [1, 2, 3, 0, 5]
        if not elem:
            return [[]] if origin not in sets else []
        e = elem + elem
        out = [e[:3], [], e[:1], e[1:4], e[:5], [e[0], e[0]]]
        if origin in sets:
            out = [set(x) for x in out if x and all(_gen_repr(y) is not None
                                                     and type(y).__hash__ for y in x)]
        return out
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            elem = _gen_type_values(args[0], mod, rnd, depth + 1) or [1, 2, 3]
            e = elem + elem
            return [tuple(e[:2]), (), tuple(e[:1]), tuple(e[1:4])]
        if not args:
            return _gen_tag_values("tuple", mod, rnd)
        parts = [(_gen_type_values(a, mod, rnd, depth + 1) or None) for a in args]
        parts = [p if p is not None else _gen_tag_values("any", mod, rnd) for p in parts]
        out = []
        for i in range(6):
            out.append(tuple(p[(i + j) % len(p)] if i else p[0] for j, p in enumerate(parts)))
        return out
    if origin in maps:
        kv = _gen_type_values(args[0], mod, rnd, depth + 1) if args else None
        vv = _gen_type_values(args[1], mod, rnd, depth + 1) if len(args) > 1 else None
        kv = kv if kv is not None else ["a", "b", "c"]
        vv = vv if vv is not None else [1, 2, 3]
        if not kv or not vv:
            return [{}]
        kv = [k for k in kv if type(k).__hash__ is not None]
        out = [{}]
        for n in (2, 1, 3):
            out.insert(len(out) - 1 if n == 2 else len(out),
                       {kv[i % len(kv)]: vv[i % len(vv)] for i in range(n)})
        return out
    if t in (cabc.Callable,) or origin is cabc.Callable:
        return []
    return []


_gen_attrs_cache = []


def _gen_builtin_attrs():
    """The attribute names of the literal types (str, bytes, int, float, list, tuple, dict,
    set)."""
    if not _gen_attrs_cache:
        names = set()
        for t in (str, bytes, int, float, complex, list, tuple, dict, set, bool, type(None)):
            names.update(dir(t))
        _gen_attrs_cache.append(frozenset(names))
    return _gen_attrs_cache[0]


def _gen_guess_tag(fnode, pname):
    """The type tag of an untyped parameter, from its uses in the body, then from its name."""
    votes = {}

    def vote(tag, w=1):
        votes[tag] = votes.get(tag, 0) + w

    def is_p(n):
        return isinstance(n, ast.Name) and n.id == pname

    for n in ast.walk(fnode):
        if isinstance(n, ast.Call):
            f = n.func
            if isinstance(f, ast.Attribute) and is_p(f.value):
                if f.attr in _gen_STR_METHODS:
                    vote("str", 3)
                elif f.attr in _gen_LIST_METHODS:
                    vote("list", 3)
                elif f.attr in _gen_DICT_METHODS:
                    vote("dict", 3)
                elif f.attr == "decode":
                    vote("bytes", 3)
                elif f.attr == "join":
                    vote("str", 2)
                elif f.attr in ("add", "discard", "union", "intersection"):
                    vote("set", 3)
            if isinstance(f, ast.Name) and n.args and is_p(n.args[0]):
                if f.id in ("len", "sorted", "reversed", "enumerate", "zip", "sum", "min", "max",
                            "list", "tuple", "set", "any", "all", "iter", "map", "filter"):
                    vote("seq", 2 if f.id != "sum" else 1)
                    if f.id == "sum":
                        vote("list", 2)
                elif f.id in ("range", "bin", "hex", "oct", "chr", "abs", "divmod", "round"):
                    vote("int", 3)
                elif f.id in ("ord",):
                    vote("str", 3)
                elif f.id in ("float", "math.sqrt"):
                    vote("num", 1)
                elif f.id == "dict":
                    vote("dict", 2)
                elif f.id == "isinstance" and len(n.args) > 1:
                    t = n.args[1]
                    ts = t.elts if isinstance(t, ast.Tuple) else [t]
                    for x in ts[:1]:
                        if isinstance(x, ast.Name):
                            tag = {"str": "str", "int": "int", "float": "float", "list": "list",
                                   "dict": "dict", "bool": "bool", "bytes": "bytes",
                                   "tuple": "tuple", "set": "set"}.get(x.id)
                            if tag:
                                vote(tag, 5)
            if isinstance(f, ast.Attribute) and f.attr == "join" and n.args and is_p(n.args[0]):
                vote("list", 2)
            if isinstance(f, ast.Name) and f.id == "range":
                for a in n.args:
                    if is_p(a):
                        vote("int", 3)
            if is_p(f):
                vote("callable", 5)
        elif isinstance(n, ast.For) and is_p(n.iter):
            vote("seq", 2)
        elif isinstance(n, ast.comprehension) and is_p(n.iter):
            vote("seq", 2)
        elif isinstance(n, ast.Subscript) and is_p(n.value):
            s = n.slice
            if isinstance(s, ast.Constant) and isinstance(s.value, str):
                vote("dict", 3)
            elif isinstance(s, ast.Slice):
                vote("seq", 2)
            else:
                vote("seq", 1)
        elif isinstance(n, ast.BinOp) and (is_p(n.left) or is_p(n.right)):
            other = n.right if is_p(n.left) else n.left
            if isinstance(other, ast.Constant):
                if isinstance(other.value, str):
                    vote("str", 2)
                elif isinstance(other.value, (int, float)) and not isinstance(other.value, bool):
                    if isinstance(n.op, ast.Mod) and is_p(n.left):
                        vote("int", 1)
                    else:
                        vote("int" if isinstance(other.value, int) else "num", 2)
            elif isinstance(n.op, (ast.Sub, ast.Div, ast.FloorDiv, ast.Pow, ast.BitAnd,
                                   ast.BitOr, ast.LShift, ast.RShift)):
                vote("int", 1)
        elif isinstance(n, ast.AugAssign) and is_p(n.target):
            if isinstance(n.value, ast.Constant) and isinstance(n.value.value, (int, float)):
                vote("int", 2)
        elif isinstance(n, ast.Compare):
            items = [n.left] + list(n.comparators)
            if any(is_p(x) for x in items):
                for x, op in zip(items[1:], n.ops):
                    if isinstance(op, (ast.In, ast.NotIn)) and is_p(x):
                        vote("seq", 2)
                for x in items:
                    if isinstance(x, ast.Constant) and not is_p(x):
                        v = x.value
                        if isinstance(v, bool) or v is None:
                            continue
                        if isinstance(v, str):
                            vote("str", 2)
                        elif isinstance(v, (int, float)):
                            vote("int" if isinstance(v, int) else "num", 2)
        elif isinstance(n, ast.Attribute) and is_p(n.value):
            if n.attr in ("real", "imag", "bit_length"):
                vote("int", 2)
            elif n.attr not in _gen_builtin_attrs():
                vote("object", 4)  # an attribute no literal has: the module's own objects
        elif isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub) and is_p(n.operand):
            vote("int", 1)
    if votes.get("callable"):
        return "callable"
    if votes.get("object"):
        return "object"
    if votes:
        best = max(votes.items(), key=lambda kv: (kv[1], kv[0]))[0]
        if best == "seq":
            for t in ("str", "list", "dict"):
                if votes.get(t):
                    return t
        return best
    for rx, tag in _gen_NAME_TAGS:
        if rx.search(pname):
            return tag
    return "any"


# ---------------------------------------------------------------- mutation


_gen_CHARS = " ,.;:-_/\\()[]{}\"'#0aZ9\n\t=@+*"


def _gen_mutate(v, rnd, mod, depth=0):
    strs, ints, floats = mod.mine()
    t = type(v)
    if rnd.random() < 0.07 and depth == 0:
        return rnd.choice([None, 0, "", [], "abc", 1, [1, 2], {"a": 1}, -1, True])
    if t is bool:
        return not v
    if t is int:
        ops = [v + 1, v - 1, 0, -v, v * 2, v // 2, 1000, 7, len(str(v)), 1, -1, 3, 64, 255]
        if ints:
            ops.append(rnd.choice(ints))
        out = rnd.choice(ops)
        # a big int is a big allocation ([None] * n) no timer interrupts
        return out if -100000 <= out <= 100000 else rnd.choice([0, 1, 2, 17])
    if t is float:
        ops = [v + 1.0, -v, 0.0, v / 2, 1e5, 0.5, 1.0, float(round(v)), -1.5, 2.0]
        if floats:
            ops.append(rnd.choice(floats))
        return rnd.choice(ops)
    if t is str or t is bytes:
        enc = t is bytes
        s = v.decode("latin-1") if enc else v
        i = rnd.randrange(len(s) + 1)
        ch = rnd.choice(_gen_CHARS)
        ops = [lambda: "", lambda: s.upper(), lambda: s.lower(), lambda: s + " ",
               lambda: " " + s, lambda: s + "1", lambda: s[: len(s) // 2], lambda: (s * 2)[:200],
               lambda: s[:i] + ch + s[i:], lambda: s[:i] + s[i + 1:],
               lambda: s.title(), lambda: s.replace(" ", ""), lambda: s[::-1],
               lambda: s[:i] + ch * 3 + s[i:], lambda: s + " " + s,
               lambda: s[:i] + rnd.choice("0123456789") + s[i:]]
        if strs:
            m = rnd.choice(strs)
            ops += [lambda: m, lambda: m, lambda: s[:i] + m + s[i:], lambda: m + s]
        out = rnd.choice(ops)()
        return out.encode("latin-1", "replace") if enc else out
    if t is list or t is tuple:
        xs = list(v)
        if not xs:
            base = rnd.choice([[1], ["a"], [1, 2, 3], [[1]], ["abc", "de"], [0]])
            return base if t is list else tuple(base)
        i = rnd.randrange(len(xs))
        ops = [lambda: [], lambda: xs[:1], lambda: xs + [xs[i]], lambda: xs[:i] + xs[i + 1:],
               lambda: xs[::-1],
               lambda: xs[:i] + [_gen_mutate(xs[i], rnd, mod, depth + 1)] + xs[i + 1:],
               lambda: xs[:i] + [_gen_mutate(xs[i], rnd, mod, depth + 1)] + xs[i + 1:],
               lambda: xs + [_gen_mutate(xs[-1], rnd, mod, depth + 1)], lambda: xs * 2,
               lambda: sorted(xs) if all(type(x) is type(xs[0]) for x in xs) else xs[1:]]
        try:
            out = rnd.choice(ops)()
        except BaseException:
            out = xs[1:]
        return out if t is list else tuple(out)
    if t is set:
        xs = list(v)
        return set(_gen_mutate(xs, rnd, mod, depth + 1) or xs)
    if t is dict:
        items = list(v.items())
        if not items:
            return rnd.choice([{"a": 1}, {"key": "value"}, {1: 2}])
        i = rnd.randrange(len(items))
        k, x = items[i]
        ops = [lambda: {}, lambda: dict(items[:i] + items[i + 1:]),
               lambda: dict(items + [(_gen_mutate(k, rnd, mod, depth + 1), x)]),
               lambda: dict(items[:i] + [(k, _gen_mutate(x, rnd, mod, depth + 1))] + items[i + 1:]),
               lambda: dict(items[:i] + [(k, _gen_mutate(x, rnd, mod, depth + 1))] + items[i + 1:])]
        if strs:
            m = rnd.choice(strs)
            ops.append(lambda: dict(items + [(m, x)]))
        try:
            return rnd.choice(ops)()
        except BaseException:
            return {}
    return rnd.choice([0, 1, "abc", [1, 2], None, {"a": 1}, 2.5, "", True])


# ---------------------------------------------------------------- parameters


class _gen_Param:
    __slots__ = ("name", "kind", "has_default", "default", "values", "source")


def _gen_resolve_ann(ann, glb):
    if isinstance(ann, str):
        try:
            # the module's own annotation text, evaluated in its globals (inside the sandbox)
            return eval(ann, dict(glb) if isinstance(glb, dict) else {}, {})
        except BaseException:
            return None
    return ann


def _gen_params(func, drop_first, fnode, mod, rnd):
    """The parameters of func (minus self/cls) with candidate values; None when they cannot be
    read."""
    try:
        sig = _gen_mods.inspect.signature(func)
    except BaseException:
        return None
    ps = list(sig.parameters.values())
    if drop_first and ps and ps[0].kind in (_gen_P.POSITIONAL_ONLY,
                                             _gen_P.POSITIONAL_OR_KEYWORD):
        ps = ps[1:]
    try:
        hints = _gen_mods.typing.get_type_hints(func)
    except BaseException:
        hints = {}
    glb = getattr(func, "__globals__", {})
    out = []
    for p in ps:
        if p.kind == _gen_P.VAR_KEYWORD:
            continue
        q = _gen_Param()
        q.name, q.kind = p.name, p.kind
        q.has_default = p.default is not _gen_mods.inspect.Parameter.empty
        q.default = p.default
        ann = hints.get(p.name, p.annotation)
        ann = _gen_resolve_ann(ann, glb)
        vals = None
        try:
            vals = _gen_type_values(ann, mod, rnd)
        except BaseException:
            vals = None
        q.source = "typed" if vals is not None else "fuzzed"
        if vals is None:
            tag = _gen_guess_tag(fnode, p.name) if fnode is not None else "any"
            if q.has_default and q.default is not None and _gen_repr(q.default) is not None:
                dt = type(q.default)
                tag = {str: "str", int: "int", float: "float", bool: "bool", bytes: "bytes",
                       list: "list", dict: "dict", tuple: "tuple"}.get(dt, tag)
            q.source = "object" if tag in ("object", "callable") else q.source
            vals = _gen_tag_values(tag if tag not in ("callable", "object") else "any", mod, rnd)
            if p.kind == _gen_P.VAR_POSITIONAL:
                # uses of *args are uses of the tuple: its elements are anything
                vals = _gen_tag_values("any", mod, rnd)
        vals = [v for v in vals if _gen_repr(v) is not None]
        if q.has_default and _gen_repr(q.default) is not None:
            r = _gen_repr(q.default)
            vals = [v for v in vals if _gen_repr(v) != r]
        q.values = vals
        out.append(q)
    return out, hints


def _gen_build(params, choice):
    """(pos, kw) from {param name: value}, params in order; *args from a list value."""
    pos, kw = [], {}
    positional_ok = True
    for p in params:
        if p.name not in choice:
            if p.kind in (_gen_P.POSITIONAL_ONLY,
                          _gen_P.POSITIONAL_OR_KEYWORD):
                positional_ok = False
            continue
        v = choice[p.name]
        if p.kind == _gen_P.VAR_POSITIONAL:
            if positional_ok:
                pos.extend(v)
        elif p.kind == _gen_P.KEYWORD_ONLY or \
                (p.kind == _gen_P.POSITIONAL_OR_KEYWORD and not positional_ok):
            kw[p.name] = v
        else:
            pos.append(v)
    return pos, kw


def _gen_choices(params, rnd, limit):
    """Argument choices {name: value}: required params first with typical values, then one
    parameter varied at a time, optional ones added, then random combinations."""
    req = [p for p in params if not p.has_default and p.kind != _gen_P.VAR_POSITIONAL]
    opt = [p for p in params if p.has_default]
    var = [p for p in params if p.kind == _gen_P.VAR_POSITIONAL]
    if any(not p.values for p in req):
        return
    base = {p.name: p.values[0] for p in req}
    yield dict(base)
    width = max([len(p.values) for p in req] + [1])

    def one_at_a_time(lo, hi):
        for i in range(lo, hi):
            for p in req:
                if i < len(p.values):
                    c = dict(base)
                    c[p.name] = p.values[i]
                    yield c
    yield from one_at_a_time(1, min(3, width))
    for p in opt:
        for v in p.values[:3]:
            c = dict(base)
            c[p.name] = v
            yield c
    for p in var:
        for k in (1, 2, 3):
            c = dict(base)
            c[p.name] = p.values[:k]
            yield c
    yield from one_at_a_time(3, width)
    for p in opt:
        for v in p.values[3:8]:
            c = dict(base)
            c[p.name] = v
            yield c
    for _ in range(limit):
        c = {}
        for p in req:
            c[p.name] = rnd.choice(p.values)
        for p in opt:
            if p.values and rnd.random() < 0.3:
                c[p.name] = rnd.choice(p.values)
        for p in var:
            if p.values and rnd.random() < 0.5:
                c[p.name] = [rnd.choice(p.values) for _ in range(rnd.randrange(1, 4))]
        yield c


def _gen_readable(v, depth):
    """Whether every string in v (a drawn value: containers of scalars, a few levels deep) is
    printable text (tabs and newlines allowed)."""
    if depth > 8:
        return False
    if isinstance(v, str):
        return all(c.isprintable() or c in "\n\t" for c in v)
    if isinstance(v, (list, tuple, set, frozenset)):
        return all(_gen_readable(x, depth + 1) for x in v)
    if isinstance(v, dict):
        return all(_gen_readable(k, depth + 1) and _gen_readable(x, depth + 1) for k, x in v.items())
    return True


def _gen_hypothesis_choices(params, hints, n, seed):
    """Up to n argument choices drawn by Hypothesis's from_type (derandomized) for typed
    parameters; [] when Hypothesis is missing or cannot build strategies."""
    try:
        from hypothesis import HealthCheck, Phase, find, settings, strategies as st
        import hypothesis.errors as herr
    except BaseException:
        return []
    req = [p for p in params if not p.has_default and p.kind != _gen_P.VAR_POSITIONAL]
    if not req or any(p.name not in hints for p in req):
        return []
    try:
        strats = [st.from_type(hints[p.name]) for p in req]
    except BaseException:
        return []
    out = []

    def take(v):
        # Text a person would write only: Hypothesis's strings reach NULs, control characters,
        # surrogates and private-use code points, which make rows no model learns from.
        if len(out) < n and _gen_readable(v, 0):
            out.append(v)
        return False
    try:
        find(st.tuples(*strats), take,
             settings=settings(max_examples=n, derandomize=True, database=None, deadline=None,
                               suppress_health_check=list(HealthCheck), phases=[Phase.generate],
                               verbosity=__import__("hypothesis").Verbosity.quiet))
    except BaseException:
        pass
    _ = herr
    return [{p.name: v for p, v in zip(req, t)} for t in out]


# ---------------------------------------------------------------- calls found in the module


def _gen_literal_args(call):
    pos, kw = [], {}
    for a in call.args:
        if isinstance(a, ast.Starred):
            return None
        try:
            pos.append(_gen_literal_eval(a))
        except BaseException:
            return None
    for k in call.keywords:
        if k.arg is None:
            return None
        try:
            kw[k.arg] = _gen_literal_eval(k.value)
        except BaseException:
            return None
    return pos, kw


def _gen_calls_in(tree, unit):
    """Calls of the unit with literal arguments in tree: [(init, args)] where init is
    (pos, kw) or None (use the default instance) and args (pos, kw)."""
    out = []
    for n in ast.walk(tree):
        if len(out) >= 64:
            break
        if not isinstance(n, ast.Call):
            continue
        f = n.func
        if not unit.cls:
            if isinstance(f, ast.Name) and f.id == unit.name or \
                    isinstance(f, ast.Attribute) and f.attr == unit.name:
                a = _gen_literal_args(n)
                if a is not None:
                    out.append((None, a))
            continue
        if not (isinstance(f, ast.Attribute) and f.attr == unit.name):
            continue
        a = _gen_literal_args(n)
        if a is None:
            continue
        recv = f.value
        if isinstance(recv, ast.Call) and isinstance(recv.func, ast.Name) and \
                recv.func.id == unit.cls:
            ia = _gen_literal_args(recv)
            if ia is not None:
                out.append((ia, a))
        else:
            out.append((None, a))
    return out


def _gen_docstrings(tree):
    for n in ast.walk(tree):
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)):
            try:
                d = ast.get_docstring(n, clean=True)
            except BaseException:
                d = None
            if d and ">>>" in d:
                yield n, d


def _gen_doctest_calls(node, doc, unit):
    out = []
    try:
        examples = _gen_mods.doctest.DocTestParser().get_examples(doc[:20000])
    except BaseException:
        return out
    for ex in examples[:200]:
        try:
            t = _gen_parse(ex.source)
        except BaseException:
            continue
        out.extend(_gen_calls_in(t, unit))
    return out


# ---------------------------------------------------------------- the generator


class _gen_Gen:
    """Generation for one unit: candidates, runs, selection."""

    def __init__(self, req, mod, module, unit, deadline):
        self.req, self.mod, self.module, self.unit = req, mod, module, unit
        self.deadline = deadline
        self.seed = int(req.get("seed") or 0)
        self.rnd = random.Random(self.seed)
        self.attempts_max = max(1, int(req.get("attempts") or 200))
        self.k = max(1, int(req.get("per_function") or 4))
        self.attempts = 0
        self.seen = set()
        self.explored = set()
        self.explored_normal = set()
        self.kept = []      # [(call, source, lines, raised, returned_normally)]
        self.pool = []      # candidates to mutate: (init, args) tuples
        self.counts = {"timeout": 0, "unrenderable": 0, "nondeterministic": 0, "raised": 0,
                       "normal": 0, "arity": 0, "init": 0}
        self.lines_set = set()
        self.init_failed = False
        self.depth = 0
        f = sys._getframe()
        while f is not None:
            self.depth += 1
            f = f.f_back

    # -- calling
    def target(self, init):
        """The callable for one run (a fresh instance for methods)."""
        u, m = self.unit, self.module
        if not u.cls:
            return getattr(m, u.name)
        cls = getattr(m, u.cls)
        if u.kind == "method":
            ipos, ikw = init if init is not None else ([], {})
            self.init_failed = True
            inst = cls(*ipos, **ikw)
            self.init_failed = False
            return getattr(inst, u.name)
        return getattr(cls, u.name)

    def render(self, init, args):
        u = self.unit

        def argtext(pos, kw):
            parts = []
            for v in pos:
                r = _gen_repr(v)
                if r is None:
                    return None
                parts.append(r)
            for k, v in kw.items():
                r = _gen_repr(v)
                if r is None or not isinstance(k, str) or not k.isidentifier():
                    return None
                parts.append(k + "=" + r)
            return ", ".join(parts)
        a = argtext(*args)
        if a is None:
            return None
        if not u.cls:
            text = u.name + "(" + a + ")"
        elif u.kind == "method":
            i = argtext(*(init if init is not None else ([], {})))
            if i is None:
                return None
            text = u.cls + "(" + i + ")." + u.name + "(" + a + ")"
        else:
            text = u.cls + "." + u.name + "(" + a + ")"
        return text if len(text) <= _gen_CALL_MAX else None

    def run_once(self, text):
        """One run of a rendered call: an outcome."""
        call = _gen_parse(text, mode="eval").body
        init = None
        if self.unit.kind == "method":
            init = (call.func.value.args, call.func.value.keywords)
        args = (call.args, call.keywords)
        o = _gen_Outcome()
        o.raised, o.timeout, o.init_failed, o.sig = "", False, False, ""
        now = _gen_monotonic()
        limit = min(_gen_RUN_S, max(0.0, self.deadline - now))
        tr = _gen_Tracer(self.mod.filename, self.unit.line, self.unit.end_line, now + limit)

        def ev(nodes):
            return [_gen_literal_eval(x) for x in nodes[0]], \
                {k.arg: _gen_literal_eval(k.value) for k in nodes[1]}

        def go():
            _gen_seed(self.seed)
            ini = ev(init) if init is not None else None
            pos, kw = ev(args)
            f = self.target(ini)
            clear = getattr(f, "cache_clear", None)
            if callable(clear):
                clear()
            _gen_setrlimit(self.depth + 250)
            _gen_settrace(tr.glob)
            try:
                r = f(*pos, **kw)
                _gen_fix_builtins()
                if isinstance(r, types.GeneratorType) or (
                        hasattr(type(r), "__next__") and hasattr(type(r), "__iter__")
                        and not isinstance(r, (str, bytes, list, tuple, dict))):
                    r = list(itertools.islice(r, _gen_ITER_MAX))
            finally:
                _gen_settrace(None)
                _gen_fix_builtins()
            s = repr(r)
            if len(s) > _gen_SIG_MAX:
                s = s[:_gen_SIG_MAX] + "...%d" % len(s)
            return _gen_ADDR_RE.sub(" at 0x?", s)
        self.init_failed = False
        ok, v = _gen_guarded(go, limit)
        o.entered, o.lines, o.seq = tr.entered, tr.lines, tr.seq
        if ok:
            o.sig = v
        else:
            o.raised = str(type(v).__name__)[:100]
            if isinstance(v, _gen_Timeout):
                o.timeout = True
                o.raised = "_gen_Timeout"
            elif self.init_failed:
                o.init_failed = True
        return o

    # -- one candidate
    def budget_left(self):
        return (self.attempts < self.attempts_max and _gen_monotonic() < self.deadline
                and _gen_wall() < _gen_state["wall_deadline"])

    def try_cand(self, init, args, source):
        """Runs one candidate; True when it reached new lines."""
        if not self.budget_left():
            return False
        text = self.render(init, args)
        if text is None:
            self.counts["unrenderable"] += 1
            return False
        if text in self.seen:
            return False
        self.seen.add(text)
        self.attempts += 1
        o = self.run_once(text)
        if o.timeout:
            self.counts["timeout"] += 1
            return False
        if o.init_failed:
            self.counts["init"] += 1
            return False
        if not o.entered:
            self.counts["arity"] += 1
            return False
        if o.raised:
            self.counts["raised"] += 1
        else:
            self.counts["normal"] += 1
        # a normal return is new when it reaches lines no normal return reached (a TypeError
        # on the same lines must not hide the input that gets through them)
        seen = self.explored if o.raised else self.explored_normal
        if not (o.lines - seen):
            return False
        self.explored |= o.lines
        if not o.raised:
            self.explored_normal |= o.lines
        self.pool.append((init, args))
        keepable = not o.raised or o.raised not in _gen_NOKEEP_EXC
        if keepable and self.budget_left():
            self.attempts += 1
            o2 = self.run_once(text)
            if o2.key() != o.key():
                self.counts["nondeterministic"] += 1
                return True
            self.kept.append((text, source, o.lines, o.raised))
        return True

    def init_choices(self):
        """Argument lists for the class's constructor (methods): [(pos, kw)]."""
        u = self.unit
        if u.kind != "method":
            return [None]
        cls = getattr(self.module, u.cls)
        init_node = None
        for s in u.cls_node.body:
            if isinstance(s, ast.FunctionDef) and s.name == "__init__":
                init_node = s
        try:
            got = _gen_params(cls, False, init_node, self.mod, self.rnd)
        except BaseException:
            got = None
        if got is None:
            return [([], {})]
        params, _ = got
        out = []
        for c in itertools.islice(_gen_choices(params, self.rnd, 12), 40):
            out.append(_gen_build(params, c))
        return out or [([], {})]

    def good_inits(self, limit=4):
        """Constructor argument lists that build an instance (tried under the budget)."""
        good = []
        for init in self.init_choices():
            if len(good) >= limit or _gen_monotonic() > self.deadline:
                break
            if self.render(init, ([], {})) is None:
                continue
            ipos, ikw = init
            cls = getattr(self.module, self.unit.cls)
            ok, _ = _gen_guarded(lambda: cls(*ipos, **ikw), min(_gen_RUN_S, max(
                0.0, self.deadline - _gen_monotonic())))
            if ok:
                good.append(init)
        return good

    def generate(self):
        u, m = self.unit, self.module
        # the callable and its parameters
        if u.cls:
            cls = getattr(m, u.cls, None)
            raw = _gen_mods.inspect.getattr_static(cls, u.name, None) if cls is not None else None
            func = raw.__func__ if isinstance(raw, (staticmethod, classmethod)) else raw
            drop = u.kind in ("method", "classmethod")
        else:
            func = getattr(m, u.name, None)
            drop = False
        if func is None or not callable(func):
            return "not_found"
        got = _gen_params(func, drop, u.node, self.mod, self.rnd)
        if got is None:
            return "no_signature"
        params, hints = got
        inits = [None]
        if u.kind == "method":
            inits = self.good_inits()
            if not inits:
                return "class_needs_arguments"
        # a required parameter no literal can stand for (annotated with a class of the module's)
        self.needs_object = any(not p.values and not p.has_default and
                                p.kind != _gen_P.VAR_POSITIONAL
                                for p in params)
        # a parameter used as an object of the module's (attributes no literal has) or called
        self.uses_object = any(p.source == "object" and not p.has_default for p in params)
        share = max(4, self.attempts_max // 3)
        # a. examples
        found = []
        for node, doc in _gen_docstrings(self.mod.tree):
            for c in _gen_doctest_calls(node, doc, u):
                found.append((c, "doctest" if node is u.node or node is u.cls_node else "example"))
        # doctests of the unit itself first
        found.sort(key=lambda x: x[1] != "doctest")
        for c in _gen_calls_in(self.mod.tree, u):
            found.append((c, "example"))
        for s in list(self.req.get("seeds") or [])[:64]:
            if not isinstance(s, str) or len(s) > _gen_CALL_MAX:
                continue
            try:
                call = _gen_parse("f(" + s + ")", mode="eval").body
            except BaseException:
                continue
            a = _gen_literal_args(call)
            if a is not None:
                found.append(((None, a), "llm"))
        for (init, args), src in found[:share]:
            if init is None:
                init = inits[0]
            self.try_cand(init if u.kind == "method" else None, args, src)
        if self.full():
            return ""
        all_default = all(p.has_default or p.kind == _gen_P.VAR_POSITIONAL
                          for p in params)
        if all_default:
            self.try_cand(inits[0], ([], {}), "example")
        # b, c: typed and guessed values
        typed = all(p.source == "typed" for p in params if not p.has_default)
        src = "typed" if typed and params else "fuzzed"
        n = 0
        for c in _gen_choices(params, self.rnd, share):
            if n >= share or not self.budget_left() or self.full():
                break
            n += 1
            init = inits[n % len(inits)]
            # labelled by how its values were made (outside review: the first, the defaults
            # as they are, was "example" though its required arguments were generated)
            self.try_cand(init, _gen_build(params, c), src)
        if typed and params and self.budget_left() and not self.full():
            for c in _gen_hypothesis_choices(params, hints, min(30, share), self.seed):
                if not self.budget_left() or self.full():
                    break
                self.try_cand(inits[0], _gen_build(params, c), "typed")
        # d. coverage-guided mutation
        stale = 0
        while self.budget_left() and not self.full() and stale < _gen_NO_PROGRESS:
            if not self.pool:
                break
            init, (pos, kw) = self.pool[-1 - min(len(self.pool) - 1,
                                                 int(self.rnd.random() ** 2 * len(self.pool)))]
            pos, kw = list(pos), dict(kw)
            init2 = init
            for _ in range(1 + (self.rnd.random() < 0.3)):
                slots = len(pos) + len(kw)
                if u.kind == "method" and init and (init[0] or init[1]) and \
                        (slots == 0 or self.rnd.random() < 0.2):
                    ip, ik = list(init[0]), dict(init[1])
                    if ip and (not ik or self.rnd.random() < 0.7):
                        i = self.rnd.randrange(len(ip))
                        ip[i] = _gen_mutate(ip[i], self.rnd, self.mod)
                    elif ik:
                        k = self.rnd.choice(sorted(ik))
                        ik[k] = _gen_mutate(ik[k], self.rnd, self.mod)
                    init2 = (ip, ik)
                elif slots:
                    i = self.rnd.randrange(slots)
                    if i < len(pos):
                        pos[i] = _gen_mutate(pos[i], self.rnd, self.mod)
                    else:
                        k = sorted(kw)[i - len(pos)]
                        kw[k] = _gen_mutate(kw[k], self.rnd, self.mod)
                else:
                    break
            before = self.attempts
            if self.try_cand(init2, (pos, kw), "fuzzed"):
                stale = 0
            elif self.attempts == before:
                stale += 1 if len(self.seen) < 100000 else _gen_NO_PROGRESS
            else:
                stale += 1
        return ""

    def full(self):
        """Whether no candidate can add anything: the kept inputs reach every line, a normal
        return among them (a function whose error paths are kept, and the rest reached by normal
        returns, stops here too: Hypothesis and mutation, the costly steps, are then skipped)."""
        lines = self.lines_set
        if not lines:
            return False
        got, normal = set(), False
        for _, _, ls, raised in self.kept:
            got |= ls
            normal = normal or not raised
        return normal and lines <= got

    def select(self):
        """Up to K kept inputs: greedy by new lines, normal returns first, at most max(1, K//4)
        raising ones; in the order they were found."""
        lines = self.lines_set
        chosen, covered = [], set()
        normal = [x for x in self.kept if not x[3]]
        raising = [x for x in self.kept if x[3]]
        for group, cap in ((normal, self.k), (raising, max(1, self.k // 4))):
            taken = 0
            rest = list(group)
            while rest and len(chosen) < self.k and taken < cap:
                best = max(rest, key=lambda x: (len((x[2] & lines) - covered), -rest.index(x)))
                gain = (best[2] & lines) - covered
                if not gain and (chosen or taken):
                    break
                chosen.append(best)
                covered |= best[2] & lines
                rest.remove(best)
                taken += 1
        order = {id(x): i for i, x in enumerate(self.kept)}
        chosen.sort(key=lambda x: order[id(x)])
        return chosen


def _gen_units(mod, module, deadline):
    """What a find run reports: [{"qualname", "kind", "line", "end_line", "skip"}]."""
    out = []
    classes = {}
    try:
        io = _gen_io_functions(mod.tree, mod.defs)
    except BaseException:
        io = (frozenset(), None)
    for node, cls_node in mod.defs:
        if len(out) >= _gen_MAX_FUNCTIONS:
            break
        if isinstance(node, ast.ClassDef):
            continue
        kind, skip = _gen_kind_and_skip(node, cls_node, io)
        u = _gen_Unit(node, cls_node, kind)
        if not skip:
            skip = _gen_dynamic_skip(mod, module, u, classes, deadline)
        out.append({"qualname": u.qualname, "kind": kind, "line": u.line,
                    "end_line": u.end_line, "skip": skip})
    # a name defined twice (if/else branches, redefinitions): the def whose code the module's
    # object runs is the unit (the dynamic check), a second one that matches too is a duplicate
    seen = set()
    for f in out:
        if not f["skip"]:
            if f["qualname"] in seen:
                f["skip"] = "redefined"
            seen.add(f["qualname"])
    return out


def _gen_dynamic_skip(mod, module, u, classes, deadline):
    """Why the imported module's object for u is no unit ("" when it is one)."""
    try:
        if not u.cls:
            obj = module.__dict__.get(u.name)
            if obj is None:
                return "not_found"
            if not callable(obj):
                return "not_callable"
            if not _gen_code_matches(obj, mod.filename, u.line, u.end_line):
                return "decorated_unknown" if u.node.decorator_list else "redefined"
            return ""
        cls = module.__dict__.get(u.cls)
        if not isinstance(cls, type):
            return "not_found"
        try:
            raw = cls.__dict__.get(u.name)
        except BaseException:
            raw = None
        if raw is None:
            return "not_found"
        if isinstance(raw, property):
            return "property"
        if not _gen_code_matches(raw, mod.filename, u.line, u.end_line):
            return "decorated_unknown" if u.node.decorator_list else "redefined"
        if u.kind in ("staticmethod", "classmethod"):
            return ""
        if u.cls not in classes:
            classes[u.cls] = _gen_class_skip(mod, module, u, cls, deadline)
        return classes[u.cls]
    except BaseException:
        return "not_found"


def _gen_class_skip(mod, module, u, cls, deadline):
    """Why instances of cls cannot be built for its methods ("" when they can)."""
    try:
        if _gen_mods.inspect.isabstract(cls):
            return "abstract"
    except BaseException:
        pass
    g = _gen_Gen({"attempts": 40, "per_function": 1, "seed": 0}, mod, module, u,
                 min(deadline, _gen_monotonic() + 1.0))
    try:
        if g.good_inits(limit=1):
            return ""
    except BaseException:
        pass
    # out of time: let the generate run (a budget of its own) decide
    return "class_needs_arguments" if _gen_monotonic() < g.deadline else ""


def _gen_missing(e):
    if isinstance(e, ModuleNotFoundError):
        n = getattr(e, "name", None)
        return n if isinstance(n, str) else ""
    return ""


def _gen_import(load_module, deadline):
    """(module, error dict or None)."""
    ok, m = _gen_guarded(load_module, max(0.01, deadline - _gen_monotonic()))
    if ok:
        return m, None
    if isinstance(m, _gen_Timeout):
        return None, {"status": "exception", "detail": "import timed out", "reason": "timeout"}
    # the exception is the module's: its str() and name run under the timer too
    ok, d = _gen_guarded(lambda: str(type(m).__name__ + ": " + str(m))[:300], 0.2)
    if not ok or type(d) is not str:
        d = "import failed"
    ok, missing = _gen_guarded(_gen_missing, 0.2, m)
    if not ok or type(missing) is not str:
        missing = ""
    return None, {"status": "exception", "detail": d, "missing_module": missing[:200],
                  "reason": "import_failed"}


def _gen_main(req, load_module):
    """The generator's entry point (see the contract in docs: find or generate)."""
    t0 = _gen_monotonic()
    wall0 = _gen_wall()
    _gen_mods.load()
    out = {"status": "ok", "detail": "", "missing_module": "", "functions": [], "inputs": [],
           "lines": [], "attempts": 0, "reason": ""}
    try:
        budget = float(req.get("budget_s") or 5.0)
        if not budget > 0:
            budget = 5.0
        deadline = t0 + budget * 0.88 - 0.05
        # What burns no CPU stops before the supervisor's kill (the run's wall limit is budget_s).
        _gen_state["wall_deadline"] = wall0 + budget * 0.88 - 0.05
        function = req.get("function") or ""
        code, filename = req.get("code"), req.get("filename")
        if not isinstance(code, str) or not isinstance(filename, str) or \
                not isinstance(function, str):
            out.update(status="invalid", detail="code, filename and function must be strings")
            return out
        try:
            mod = _gen_Module(code, filename)
        except BaseException as e:
            out.update(status="invalid", detail=("cannot parse: " + type(e).__name__)[:200],
                       reason="syntax_error")
            return out
        units = []
        if function:
            for node, cls_node in mod.defs:
                if isinstance(node, ast.ClassDef):
                    continue
                kind, _ = _gen_kind_and_skip(node, cls_node)
                u = _gen_Unit(node, cls_node, kind)
                if u.qualname == function:
                    units.append(u)
            if not units:
                out.update(reason="not_found")
                return out
        module, err = _gen_import(load_module, deadline)
        if err is not None:
            out.update(err)
            return out
        if not function:
            out["functions"] = _gen_units(mod, module, deadline)
            return out
        # of several defs of the name, the one whose code the module's object runs
        unit = units[-1]
        for u in units:
            try:
                obj = module.__dict__.get(u.name) if not u.cls else \
                    module.__dict__.get(u.cls).__dict__.get(u.name)
            except BaseException:
                obj = None
            if obj is not None and _gen_code_matches(obj, mod.filename, u.line, u.end_line):
                unit = u
                break
        g = _gen_Gen(req, mod, module, unit, deadline)
        g.lines_set = set(_gen_exec_lines(mod, unit))
        out["lines"] = sorted(g.lines_set)
        reason = ""
        try:
            reason = g.generate()
        except BaseException as e:  # the module's doing: what was kept so far stands
            if not g.kept:
                reason = "generator_error"
                out["detail"] = ("generator: " + type(e).__name__)[:200]
        out["attempts"] = g.attempts
        chosen = g.select()
        out["inputs"] = [{"call": c, "source": s, "lines": sorted(ls & g.lines_set),
                          "raised": r} for c, s, ls, r in chosen]
        if not chosen:
            c = g.counts
            if reason:
                pass
            elif g.attempts == 0 and _gen_monotonic() >= deadline:
                reason = "timeout"
            elif g.attempts == 0 and getattr(g, "needs_object", False):
                reason = "unrenderable"
            elif g.attempts == 0 and not c["unrenderable"]:
                reason = "no_candidates"
            elif c["nondeterministic"]:
                reason = "nondeterministic"
            elif getattr(g, "uses_object", False) and c["normal"] == 0:
                reason = "needs_object"
            elif c["normal"] == 0 and c["raised"] > 0:
                reason = "all_raised"
            elif c["timeout"] and c["normal"] == 0:
                reason = "timeout"
            elif c["unrenderable"] and g.attempts == 0:
                reason = "unrenderable"
            elif c["init"] and c["normal"] == 0:
                reason = "class_needs_arguments"
            elif c["arity"] and c["normal"] == 0:
                reason = "no_candidates"
            else:
                reason = "no_new_lines"
            out["reason"] = reason
        return out
    except BaseException as e:
        try:
            out.update(status="exception", detail=("generator: " + type(e).__name__)[:200])
        except BaseException:
            pass
        return out
