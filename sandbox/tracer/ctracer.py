# The sandbox's tracer, part 2 of 8: configures and drives the item's C tracer (its key, limits
# and helpers, the audit hook). Not a module of its own: the zygote's -c program compiles the 8
# parts as one module, in the order of sandbox.tracerFiles (common.py says how).


# --------------------------------------------------------------------------------------------
# The tracer (item process only)
# --------------------------------------------------------------------------------------------
#
# The tracer itself is C (sandbox/native/tracer.c): a trace function with no Python frame and no
# state Python code can reach. This part configures it and drives it: tracer_call runs a function
# item from its module body to its end record; test runs call tracer_start before the runner and
# tracer_end after it, and mark each phase of the test with a _phase generator, whose events the
# tracer watches itself (so no Python callable turns recording on or off).

def _phase(plugin=None, item=None):
    """A test phase: recording runs from this generator's `yield` until it is resumed.  pytest
    calls it as a hook wrapper around each phase; unittest around the whole run."""
    yield


def _helpers(req):
    """The Python helpers the C tracer calls (test runs): the source lines of a traced file and
    the block of a code object's def.  They hold nothing but file contents; Go checks every
    source text and function record against the real files, so they need not be trusted."""
    own_lines = _NEWLINE_RE.split(req["code"])
    filename = req["filename"]
    _open, _BytesIO, _detect_encoding = io.open, io.BytesIO, tokenize.detect_encoding
    _compile, _ONLY_AST, _isinstance, _getattr = compile, ast.PyCF_ONLY_AST, isinstance, getattr
    _DEF_NODES, _ClassDef, _AST = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef), ast.ClassDef, ast.AST
    _NL_SPLIT, _NLK_SPLIT, _min, _len, _range, _list, _type, _join = (
        _NEWLINE_RE.split, _NEWLINE_KEEP_RE.split, min, len, range, list, type, "".join)
    MISSING = object()
    file_index = {}     # co_filename -> (lines, defs, stmts) or None
    blocks_seen = set()  # (file, first, last) of the function records written

    def read_lines(fn):
        if fn == filename:
            return own_lines
        try:
            with _open(fn, "rb") as fh:
                data = fh.read()
            enc, _ = _detect_encoding(_BytesIO(data).readline)
            return _NL_SPLIT(data.decode(enc))
        except Exception:
            return []

    def child_nodes(node):
        for name in node._fields:
            v = _getattr(node, name, None)
            if _isinstance(v, _AST):
                yield v
            elif _type(v) is _list:
                for x in v:
                    if _isinstance(x, _AST):
                        yield x

    def index_file(fn):
        """(lines with their endings, {(first, name): (qualname, first, last)}, top-level
        statement ranges) of a source file, or None."""
        try:
            with _open(fn, "rb") as fh:
                data = fh.read()
            enc, _ = _detect_encoding(_BytesIO(data).readline)
            text = data.decode(enc)
            tree = _compile(text, fn, "exec", _ONLY_AST, dont_inherit=True)
        except Exception:
            return None
        parts = _NLK_SPLIT(text)
        lines = [parts[i] + (parts[i + 1] if i + 1 < _len(parts) else "")
                 for i in _range(0, _len(parts), 2)]
        if lines and lines[-1] == "":
            lines.pop()
        defs = {}
        todo = [(tree, "")]
        while todo:
            node, prefix = todo.pop()
            for child in child_nodes(node):
                if _isinstance(child, _DEF_NODES):
                    q = prefix + child.name
                    a = _min([child.lineno] + [d.lineno for d in child.decorator_list])
                    defs.setdefault((a, child.name), (q, a, child.end_lineno))
                    todo.append((child, q + ("." if _isinstance(child, _ClassDef)
                                             else ".<locals>.")))
                else:
                    todo.append((child, prefix))
        stmts = [(_min([n.lineno] + [d.lineno for d in _getattr(n, "decorator_list", ())]),
                  n.end_lineno) for n in tree.body]
        return lines, defs, stmts

    def function_block(code):
        """(qualname, first, last, source) of the block a code object's `function` record shows,
        or None.  The block is the code object's own def (decorators included) from the file's
        AST; a lambda, comprehension or generator expression maps to its innermost enclosing def
        or class, or at module level to the top-level statement holding it; a module's code is
        the whole file.  Blocks already written, unreadable or unparsable files give None."""
        fn = code.co_filename
        ent = file_index.get(fn, MISSING)
        if ent is MISSING:
            ent = file_index[fn] = index_file(fn)
        if ent is None:
            return None
        lines, defs, stmts = ent
        name = code.co_name
        first = code.co_firstlineno
        hit = None
        if name == "<module>":
            hit = ("<module>", 1, _len(lines))
        else:
            d = defs.get((first, name))
            if d is not None:
                hit = (_getattr(code, "co_qualname", d[0]), d[1], d[2])
            else:
                for q, a, b in defs.values():     # innermost enclosing def or class
                    if a <= first <= b and (hit is None or (a >= hit[1] and b <= hit[2])):
                        hit = (q, a, b)
                if hit is None:
                    for a, b in stmts:
                        if a <= first <= b:
                            hit = ("<module>", a, b)
                            break
        if hit is None or hit[1] < 1 or hit[2] < hit[1]:
            return None
        key = (fn, hit[1], hit[2])
        if key in blocks_seen:
            return None
        blocks_seen.add(key)
        text = _join(lines[hit[1] - 1:hit[2]])
        if text.endswith("\r\n"):
            text = text[:-2]
        elif text.endswith(("\n", "\r")):
            text = text[:-1]
        return (hit[0], hit[1], hit[2], text)

    _os_open, _os_read, _os_close, _O_RDONLY, _CodeType = os.open, os.read, os.close, os.O_RDONLY, types.CodeType

    _BOM = codecs.BOM_UTF8
    _NATIVE = {"utf-8": "utf-8", "utf-8-sig": "utf-8", "iso-8859-1": "latin-1", "ascii": "ascii",
               "us-ascii": "ascii"}

    def native_decode(data):
        """A source file's text, decoded by CPython's own UTF-8, Latin-1 or ASCII decoder (never
        a codec of the registry, which the traced code can extend: codecs.register, no audit
        event); None for a file whose coding cookie names any other encoding.  An attacker's
        review: a codec of conftest.py's gave this compile other text than the import's, and
        code compiled at run time from that text passed for the file's."""
        enc, _ = _detect_encoding(_BytesIO(data).readline)
        name = _NATIVE.get(enc.lower())
        if name is None:
            return None
        if data.startswith(_BOM):
            data = data[3:]
        return data.decode(name)

    def file_codes(fn):
        """Every code object compiled from the file fn as the import system compiles it (the
        file's bytes, dont_inherit), or None.  A traced code object of that file must equal one
        of them: code compiled at run time under a traced file's name would make events show the
        file's lines for code that is not there."""
        try:
            fd = _os_open(fn, _O_RDONLY)
            try:
                chunks = []
                while True:
                    b = _os_read(fd, 1 << 20)
                    if not b:
                        break
                    chunks.append(b)
            finally:
                _os_close(fd)
            text = native_decode(b"".join(chunks))
            if text is None:
                return None
            code = _compile(text, fn, "exec", dont_inherit=True)
        except Exception:
            return None
        out, todo = [], [code]
        while todo:
            c = todo.pop()
            out.append(c)
            todo.extend(k for k in c.co_consts if _type(k) is _CodeType)
        return out

    _float, _complex, _tuple, _frozenset, _zip, _all = float, complex, tuple, frozenset, zip, all
    _set, _hash, _enumerate, _Exception = set, hash, enumerate, Exception
    _copysign = math.copysign
    _CODE_ATTRS = ("co_code", "co_names", "co_varnames", "co_freevars", "co_cellvars", "co_linetable",
                   "co_exceptiontable", "co_flags", "co_argcount", "co_posonlyargcount",
                   "co_kwonlyargcount", "co_nlocals", "co_stacksize", "co_firstlineno", "co_name",
                   "co_qualname")

    def same_const(a, b):
        if a is b:
            return True
        ta = _type(a)
        if ta is not _type(b):
            return False
        if ta is _float:            # by value and sign; a NaN is a NaN (CPython's == says no)
            return (a == b and _copysign(1.0, a) == _copysign(1.0, b)) or (a != a and b != b)
        if ta is _complex:
            return same_const(a.real, b.real) and same_const(a.imag, b.imag)
        if ta is _tuple:
            return _len(a) == _len(b) and _all(same_const(x, y) for x, y in _zip(a, b))
        if ta is _frozenset or ta is _set:
            return same_set(a, b)
        if ta is _CodeType:
            return same_code1(a, b)
        return a == b

    def same_set(a, b):
        """Two set constants hold the same elements (same_const), in any order: two compiles of
        one file may iterate an equal frozenset differently (one unmarshalled from a .pyc written
        under another hash seed, issue 29).  Each element of a is matched with one of b's."""
        if _len(a) != _len(b):
            return False
        if _all(same_const(x, y) for x, y in _zip(a, b)):
            return True
        buckets = {}
        for y in b:
            buckets.setdefault(const_key(y), []).append(y)
        for x in a:
            bucket = buckets.get(const_key(x))
            if not bucket:
                return False
            for i, y in _enumerate(bucket):
                if same_const(x, y):     # an equivalence: the first match is as good as any
                    del bucket[i]
                    break
            else:
                return False
        return True

    def const_key(x):
        """A hash of a constant that same_const-equal constants share (a NaN's hash is its
        object's, a set's is its elements' in any order)."""
        t = _type(x)
        if t is _float:
            return 0 if x != x else _hash(x)
        if t is _complex:
            return const_key(x.real) ^ (const_key(x.imag) * 1000003)
        if t is _tuple:
            h = _len(x)
            for e in x:
                h = ((h * 1000003) ^ const_key(e)) & 0xFFFFFFFFFFFF
            return h
        if t is _frozenset or t is _set:
            h = _len(x)
            for e in x:
                h = (h + const_key(e)) & 0xFFFFFFFFFFFF
            return h
        if t is _CodeType:
            return _hash((x.co_name, x.co_firstlineno))
        try:
            return _hash(x)
        except _Exception:
            return 0

    def same_code1(a, b):
        for attr in _CODE_ATTRS:
            if _getattr(a, attr, None) != _getattr(b, attr, None):
                return False
        return same_const(a.co_consts, b.co_consts)

    def same_code(code, candidates):
        """Whether code is the same code as one of candidates (compiled from its file): the
        same bytecode, names, line table and constants, compared by type and value."""
        first, name = code.co_firstlineno, code.co_name
        for c in candidates:
            if c.co_firstlineno == first and c.co_name == name and same_code1(code, c):
                return True
        return False

    return own_lines, read_lines, function_block, file_codes, same_code


def _setup_tracer(req, key):
    """Configure the item's C tracer (before seal) and install the audit hook."""
    own_lines, read_lines, function_block, file_codes, same_code = _helpers(req)
    limits = req["limits"]
    try:
        proxy_type = type(sys._getframe().f_locals)       # FrameLocalsProxy on 3.13+
    except Exception:
        proxy_type = dict
    cfg = {"value_chars": limits["value_chars"], "max_events": limits["max_events"],
           "max_trace_bytes": limits["max_trace_bytes"], "repr_ms": limits["repr_ms"],
           "naive": int(req["naive"]), "want_functions": int(req["kind"] == "test"),
           "filename": _MODULE_BOOT if req["module"] else req["filename"], "own_lines": own_lines,
           "exact_targets": frozenset(t for t in req["targets"] if not t.endswith("/")),
           "prefix_targets": tuple(t for t in req["targets"] if t.endswith("/")),
           "exclude": tuple(req["exclude"]),
           "normal_exits": sorted(_NORMAL_EXITS), "yield_value": opcode.opmap["YIELD_VALUE"]}
    helpers = {"hmac": _hmac_digest, "enc": _enc, "read_lines": read_lines,
               "function_block": function_block, "file_codes": file_codes, "same_code": same_code,
               "addr_sub": _ADDR_RE.sub,
               "dumps": functools.partial(json.dumps, separators=(",", ":")),
               "signal": _csignal.signal, "getsignal": _csignal.getsignal,
               "sig_dfl": _csignal.SIG_DFL,
               "std_flush": tuple(s.flush for s in (sys.__stdout__, sys.__stderr__) if s is not None),
               "phase": _phase.__code__ if req["kind"] == "test" else None,
               "proxy_type": None if proxy_type is dict else proxy_type}
    _N.tracer_setup(cfg, key, helpers)
    # (The code it trusts, _tracer_codes and _import_codes, the zygote gave the helper once.)
    _N.install_audit(DENIED_IMPORTS, TAMPER_IMPORTS, tuple(req["pyc_roots"]),
                     tuple(req["ext_roots"]), EXT_DENIED)
