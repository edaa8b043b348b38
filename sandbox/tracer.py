"""ndtrace sandbox zygote and line tracer.

This file is embedded in the Go binary and started inside the sandbox as

    python3 -s -B -P -c <this file> --ctrl-fd 3 [--own-pidns] [--drop-uid UID --drop-gid GID]

It is the long-lived *zygote*: it imports everything once, then forks one short-lived *item child*
per `run` request, so an item costs a fork() instead of a sandbox and interpreter start-up.  The
contract with the Go side is docs/tracer-protocol.md; the comments below only explain the why.

Trust model.  The zygote never executes user code, never unpickles and only speaks JSON.  The
item child runs untrusted code in the same process as the tracer, so everything it writes (fd 1,
2 and the events pipe on fd 3) is untrusted; the tracer's job there is to be correct for honest
code and to never crash silently for hostile or pathological code (slow/raising __repr__, huge
values, deep recursion, memory exhaustion, user forks).

Standard library only; works on CPython 3.11, 3.12 and 3.13.
"""

import argparse
import ast
import builtins
import fcntl
import gc
import io
import json
import linecache
import opcode
import operator
import os
import platform
import random
import re
import resource
import select
import signal
import socket
import stat
import struct
import sys
import time
import tokenize
import types

try:
    import _signal as _csignal   # getsignal/signal without signal.py's enum wrapping (faster)
except ImportError:              # pragma: no cover - not CPython
    _csignal = signal

EVENTS_FD = 3                 # the events pipe in the item child
MAX_MESSAGE = 64 << 20        # control-socket message cap (both directions)
CHUNK = 64 << 10              # event buffer flush threshold
RECURSION_SLACK = 100         # extra recursion depth for the tracer's own frames
RECURSION_MARGIN = 30         # the trace ends this close to the limit (the tracer needs room)
NEST_LIMIT = 40               # container nesting rendered before giving up (recursion safety)

# Exit codes of an item child that could not finish normally (Go sees them in `done`).
EXIT_TRACER_BUG = 70          # internal tracer error; an end record was attempted
EXIT_PIPE = 71                # the events pipe is unwritable: nothing more can be reported
EXIT_SETUP = 97               # the child failed before user code ran (fds, rlimits, uid drop)
EXIT_NOMEM = 99               # MemoryError even while writing the end record

DEFAULT_LIMITS = {"wall_ms": 10000, "cpu_s": 10, "as_bytes": 2 << 30, "nproc": 64,
                  "fsize_bytes": 64 << 20, "nofile": 256, "max_events": 100000,
                  "max_trace_bytes": 64 << 20, "value_chars": 1000, "repr_ms": 100}

_enc = json.encoder.encode_basestring_ascii      # C encoder: str -> quoted, ASCII-only JSON
_type_qualname = type.__dict__["__qualname__"].__get__   # bypasses metaclass overrides
_ADDR_RE = re.compile(r"0x[0-9a-fA-F]{6,}")
_DEF_RE = re.compile(r"(?:async\s+def|def|class)\b")
_NEWLINE_RE = re.compile(r"\r\n|\r|\n")          # the line breaks the tokenizer counts
_NEWLINE_KEEP_RE = re.compile(r"(\r\n|\r|\n)")  # the same, kept by re.split
_OWN_GLOBALS = globals()                         # frames running this file are never traced
# Where f_lasti points when a frame returns or yields normally; anything else after an
# exception event means the frame is being unwound (3.12+ report a StopIteration caught by
# `yield from`/`await` as an exception event followed by a normal return).
_NORMAL_EXITS = frozenset(opcode.opmap[name] for name in
                          ("RETURN_VALUE", "RETURN_CONST", "YIELD_VALUE", "RESUME")
                          if name in opcode.opmap)


def _qualname(tp):
    """Type name for placeholders and exc_type, without running user code."""
    try:
        name = _type_qualname(tp)
        return name if type(name) is str else "?"
    except Exception:
        return "?"


class _ReprTimeout(BaseException):
    """Raised by the SIGALRM handler inside a guarded user __repr__ that ran too long."""


# --------------------------------------------------------------------------------------------
# The tracer (item child only)
# --------------------------------------------------------------------------------------------

class _CodeInfo:
    """Per-code-object constants: the JSON prefix of func/file and pre-encoded source lines."""
    __slots__ = ("head", "first", "def_line", "lines", "getsrc")

    def __init__(self, code, getsrc):
        self.getsrc = getsrc
        name = getattr(code, "co_qualname", code.co_name)
        self.head = ',"func":' + _enc(name) + ',"file":' + _enc(code.co_filename) + ","
        self.first = code.co_firstlineno
        self.lines = {}
        # A decorated function's co_firstlineno is its first decorator; the call event must
        # point at the `def` line instead (decorators may span several lines).
        self.def_line = self.first
        if getsrc(self.first).lstrip().startswith("@"):
            for ln in range(self.first + 1, self.first + 200):
                if _DEF_RE.match(getsrc(ln).lstrip()):
                    self.def_line = ln
                    break

    def pair(self, lineno):
        """('"lineno":N,"depth":', ',"src":"..."') for a line, cached."""
        p = ('"lineno":%d,"depth":' % lineno, ',"src":' + _enc(self.getsrc(lineno)))
        self.lines[lineno] = p
        return p


def make_tracer(req):
    """Build the per-item tracer; called once, in the item child, after fork.

    All mutable state lives in this closure (nothing is shared with the zygote or with other
    items).  The builtins the tracer uses are bound to closure variables: faster to load, and
    immune to user code that rebinds `builtins.repr` & co.  Returns a namespace of entry points.
    """
    limits = req["limits"]
    vc = max(1, limits["value_chars"])
    max_events = limits["max_events"]
    max_bytes = limits["max_trace_bytes"]
    repr_s = max(limits["repr_ms"], 1) / 1000.0
    naive = req["naive"]
    filename = req["filename"]
    exact_targets = frozenset(t for t in req["targets"] if not t.endswith("/"))
    prefix_targets = tuple(t for t in req["targets"] if t.endswith("/"))
    exclude = tuple(req["exclude"])          # path prefixes never traced, even inside a target
    want_functions = req["kind"] == "test"   # write a `function` record per new code object
    own_lines = _NEWLINE_RE.split(req["code"])

    _repr, _type, _len, _tuple, _str, _id = repr, type, len, tuple, str, id
    _min, _max, _sum, _map, _set, _issubclass = min, max, sum, map, set, issubclass
    _write, _settrace, _gettrace = os.write, sys.settrace, sys.gettrace
    _getrec = sys.getrecursionlimit
    _setitimer, _getsignal, _signal = signal.setitimer, _csignal.getsignal, _csignal.signal
    _ITIMER, _SIGALRM = signal.ITIMER_REAL, signal.SIGALRM
    _MethodType = types.MethodType
    IMMUTABLE = frozenset((int, float, complex, bool, type(None), str, bytes))
    SCALARS = frozenset((float, complex, bool, type(None)))
    CONTAINERS = frozenset((list, tuple, dict, set, frozenset))
    INTS = frozenset((int, bool))
    FLOATS = frozenset((float, bool, type(None)))
    STRS = frozenset((str,))
    MISSING = object()
    # Element types whose rendering depends only on the object itself: a flat list, tuple or
    # dict of these renders the same as long as its elements are the very same objects.
    FLAT = IMMUTABLE
    _is, _all = operator.is_, all
    # ints strictly inside (-BIG, BIG) have a repr of at most 19 chars: no size check needed
    BIG = 10 ** 18 if vc >= 20 else 0
    INT_BITS = 14284                        # ~4300 digits (CPython's default str limit):
                                            # past that, int->str is slow (quadratic)
    FAST_WORK = 4 * vc + 1024               # flat containers up to this size use C repr()

    # Trace-wide counters and output buffer.
    buf = []
    n_events = n_bytes = 0
    flush_at = CHUNK
    ordinal = 0
    dead = False            # set in forked grandchildren: never write anything
    active = False          # tracing is installed (user reprs may remove it)
    guard = False           # a guarded user repr is running: SIGALRM raises
    ballast = [bytearray(256 << 10)]   # released on MemoryError to write the end record
    addresses = {}          # '0x7f..' -> '0x1', per trace
    slow = {}               # id -> object whose repr timed out once: not retried at every event
    keyj = {}               # local name -> '"name":' ('' when the name is excluded)
    infos = {}              # id(code) -> _CodeInfo
    pinned = []             # keeps traced code objects alive so their ids stay unique
    file_is_target = {}     # co_filename -> bool
    file_index = {}         # co_filename -> (lines, defs, stmts) or None (function records)
    blocks_seen = set()     # (file, first, last) of the function records written
    try:
        proxy_type = type(sys._getframe().f_locals)       # FrameLocalsProxy on 3.13+
    except Exception:
        proxy_type = dict

    # ---------------------------------------------------------------- output

    def flush():
        """Write the buffered lines with os.write, looping on partial writes."""
        if dead:
            buf.clear()
            return
        data = "".join(buf).encode("ascii", "backslashreplace")
        buf.clear()
        view = memoryview(data)
        try:
            while view:
                view = view[_write(EVENTS_FD, view):]
        except OSError:
            os._exit(EXIT_PIPE)

    def emit(line):
        """Append one event line, enforcing max_events / max_trace_bytes."""
        nonlocal n_events, n_bytes, flush_at
        if n_events >= max_events or n_bytes + _len(line) > max_bytes:
            limit_reached()
        n_events += 1
        n_bytes += _len(line)
        buf.append(line)
        if n_bytes >= flush_at:
            flush_at = n_bytes + CHUNK
            flush()

    def record(line):
        """Append one non-event record (function, test, collection): counts bytes, not events."""
        nonlocal n_bytes, flush_at
        if n_bytes + _len(line) > max_bytes:
            limit_reached()
        n_bytes += _len(line)
        buf.append(line)
        if n_bytes >= flush_at:
            flush_at = n_bytes + CHUNK
            flush()

    def end(status, value=None, exc_type=None, exc_message=None):
        """Write the end record and flush; the caller exits."""
        nonlocal active
        if active:
            active = False
            _settrace(None)
        parts = ['{"event":"end","status":"', status, '"']
        if value is not None:
            parts += [',"value":', _enc(value)]
        if exc_type is not None:
            parts += [',"exc_type":', _enc(exc_type)]
        if exc_message is not None:
            parts += [',"exc_message":', _enc(exc_message)]
        parts.append(',"events":%d}\n' % n_events)
        buf.append("".join(parts))
        flush()

    def finish(code=0):
        """Flush the interpreter's own stdout/stderr buffers and leave without cleanup."""
        for stream in (sys.__stdout__, sys.__stderr__):
            try:
                if stream is not None:
                    stream.flush()
            except BaseException:
                pass
        os._exit(code)

    def limit_reached():
        end("event_limit")
        finish(0)

    def end_exception(exc):
        """End record for an exception that escaped the module body or the call."""
        if _issubclass(_type(exc), MemoryError):
            ballast.clear()
            end("memory", exc_type="MemoryError")
        else:
            end("exception", render(exc), _qualname(_type(exc)), exc_message(exc))

    def fatal(exc):
        """An exception inside the tracer itself: report what we have and exit.

        A RecursionError here means the traced program recursed past the (raised) limit: the
        tracer's frames sit on top of the deepest user frame, so it hits the limit first.  That
        is reported as the program's RecursionError.  MemoryError means the item exhausted its
        address space.  Anything else is a tracer bug and exits non-zero.
        """
        nonlocal active
        try:
            _settrace(None)
            active = False
            sys.setrecursionlimit(sys.getrecursionlimit() + 1000)
            tp = _type(exc)
            if _issubclass(tp, MemoryError):
                ballast.clear()
                end("memory", exc_type="MemoryError")
                finish(0)
            if _issubclass(tp, RecursionError):
                msg = "maximum recursion depth exceeded"
                end("exception", "RecursionError(%r)" % msg, "RecursionError", msg)
                finish(0)
            end("exception", None, "TracerError",
                "internal tracer error: %s: %s" % (_qualname(tp), exc_message(exc)))
            finish(EXIT_TRACER_BUG)
        except MemoryError:
            os._exit(EXIT_NOMEM)
        except BaseException:
            os._exit(EXIT_TRACER_BUG)

    def at_fork_child():
        """os.register_at_fork hook: a process forked by user code is never traced."""
        nonlocal dead, active
        dead = True
        buf.clear()
        if active:                # an untraced run never calls settrace, not even here
            active = False
            _settrace(None)

    # ---------------------------------------------------------------- value rendering

    def on_alarm(signum, frame):
        # Only interrupts a guarded repr; a late tick (after the repr returned) is ignored.
        if guard:
            raise _ReprTimeout()

    def guarded(method, obj, what):
        """Call method(obj) (a user __repr__/__str__) under an ITIMER_REAL alarm.

        Returns the str result or a placeholder.  The alarm re-fires every 20 ms so a repr that
        swallows one _ReprTimeout still gets interrupted.  The user's own SIGALRM handler and
        pending ITIMER_REAL are restored afterwards.
        """
        nonlocal guard
        name = _qualname(_type(obj))
        if slow.get(_id(obj)) is obj:
            return "<%s object (%s timed out)>" % (name, what)
        prev_handler = _getsignal(_SIGALRM)
        if prev_handler is not on_alarm:
            _signal(_SIGALRM, on_alarm)
        result = failure = None
        prev_timer = (0.0, 0.0)
        started = time.monotonic()
        try:
            try:
                guard = True
                prev_timer = _setitimer(_ITIMER, repr_s, 0.02)
                result = method(obj)
                guard = False
            finally:
                guard = False
                _setitimer(_ITIMER, 0)
        except _ReprTimeout:
            if result is None:      # the alarm may fire right after the repr returned
                failure = "<%s object (%s timed out)>" % (name, what)
                slow[_id(obj)] = obj
        except BaseException as e:
            failure = "<%s object (%s raised %s)>" % (name, what, _qualname(_type(e)))
        guard = False
        try:
            _setitimer(_ITIMER, 0)    # the finally above may have been cut short by the alarm
            if prev_handler is not on_alarm:
                _signal(_SIGALRM, prev_handler if prev_handler is not None else signal.SIG_DFL)
            if prev_timer[0] > 0:
                left = prev_timer[0] - (time.monotonic() - started)
                _setitimer(_ITIMER, max(left, 1e-6), prev_timer[1])
        except Exception:
            pass
        if active and _gettrace() is not global_trace:
            _settrace(global_trace)   # a user repr removed or replaced the trace function
        if failure is not None:
            return failure
        if _type(result) is not str:
            if not _issubclass(_type(result), str):
                return "<%s object (%s returned %s)>" % (name, what, _qualname(_type(result)))
            result = str.__str__(result)
        return normalise(result)

    def normalise(r):
        """Replace object addresses by per-trace ordinals, looking only at a prefix of r.

        The prefix grows until the normalised text is safely longer than value_chars, so a
        partially cut address can never land inside the kept part.
        """
        if "0x" not in r:
            return r
        size = vc + 64
        while True:
            out = _ADDR_RE.sub(address, r[:size])
            if size >= _len(r) or _len(out) >= vc + 24:
                return out
            size *= 2

    def address(m):
        a = m.group(0)
        o = addresses.get(a)
        if o is None:
            o = addresses[a] = "0x%x" % (_len(addresses) + 1)
        return o

    def int_repr(v):
        bits = v.bit_length()
        if bits > INT_BITS:
            return "<int with %d bits>" % bits
        try:
            return _repr(v)
        except ValueError:           # beyond sys.get_int_max_str_digits()
            return "<int with %d bits>" % bits

    def flat_snapshot(v, tp):
        """(v, len, elements[, keys]) if v is a flat list/tuple/dict of FLAT scalars, else None."""
        try:
            if tp is list or tp is tuple:
                if _set(_map(_type, v)) <= FLAT:
                    return (v, _len(v), _tuple(v))
            elif tp is dict:
                if _set(_map(_type, v)) <= FLAT and _set(_map(_type, v.values())) <= FLAT:
                    return (v, _len(v), _tuple(v.values()), _tuple(v))
        except Exception:
            pass
        return None

    def render(v):
        """The rendering of v: repr-identical for builtins, at most vc chars plus '...'."""
        tp = _type(v)
        if tp is str:
            r = _repr(v) if _len(v) <= vc else _repr(v[:vc])
        elif tp is int:
            r = _repr(v) if -BIG < v < BIG else int_repr(v)
        elif tp in SCALARS:
            r = _repr(v)
        elif tp is bytes or tp is bytearray:
            r = _repr(v) if _len(v) <= vc else _repr(v[:vc])
        elif tp in CONTAINERS:
            r = fast_repr(v, tp)
            if r is None:
                out = []
                try:
                    room = into(v, out, vc, _set(), 0)
                except Exception as e:  # e.g. an element's repr mutated the container
                    return "<%s object (repr raised %s)>" % (_qualname(tp), _qualname(_type(e)))
                r = "".join(out)
                if room < 0:            # budget spent (or nesting too deep): always cut
                    return r[:vc] + "..."
        else:
            r = guarded(tp.__repr__, v, "repr")
        if _len(r) > vc:
            r = r[:vc] + "..."
        return r

    def flat_cost(items, types_):
        """Upper bound on the C repr work for a flat collection of safe scalars, else None."""
        if types_ <= INTS:
            return 21 * _len(items) if -BIG < _min(items) and _max(items) < BIG else None
        if types_ <= FLOATS:
            return 26 * _len(items)
        if types_ == STRS:
            return _sum(_map(_len, items)) + 4 * _len(items)
        return None

    def fast_repr(v, tp):
        """C repr() for flat containers of builtin scalars of bounded size (exact output)."""
        if not v:
            return _repr(v)
        if _len(v) * 3 > FAST_WORK:    # every element costs at least 3 chars: too big
            return None
        try:
            if tp is dict:
                kc = flat_cost(v.keys(), _set(_map(_type, v)))
                if kc is None:
                    return None
                c = flat_cost(v.values(), _set(_map(_type, v.values())))
                if c is None:
                    return None
                c += kc
            else:
                c = flat_cost(v, _set(_map(_type, v)))
            if c is None or c > FAST_WORK:
                return None
            return _repr(v)
        except Exception:   # e.g. a dict mutated under us; fall back to element-wise
            return None

    def into(x, out, room, open_ids, depth):
        """Append the repr of container x to out element by element; returns remaining room.

        Stops once room < 0 (the caller cuts the joined text).  open_ids holds the containers
        being rendered, so self-references print as Python does ([...], {...}, set(...)).
        """
        tp = _type(x)
        if _id(x) in open_ids:
            s = RECURSIVE[tp]
            out.append(s)
            return room - _len(s)
        if not x:
            s = _repr(x)
            out.append(s)
            return room - _len(s)
        if depth >= NEST_LIMIT:
            return -1                 # nesting too deep to render safely: stop, mark as cut
        opener, closer = BRACKETS[tp]
        if tp is tuple and _len(x) == 1:
            closer = ",)"
        out.append(opener)
        room -= _len(opener)
        open_ids.add(_id(x))
        first = True
        items = x.items() if tp is dict else x
        try:
            for e in items:
                if room < 0:
                    return room
                if first:
                    first = False
                else:
                    out.append(", ")
                    room -= 2
                if tp is dict:
                    room = element(e[0], out, room, open_ids, depth)
                    out.append(": ")
                    room -= 2
                    e = e[1]
                room = element(e, out, room, open_ids, depth)
        finally:
            open_ids.discard(_id(x))
        if room < 0:                  # cut anyway: a closer would only be misleading
            return room
        out.append(closer)
        return room - _len(closer)

    def element(e, out, room, open_ids, depth):
        te = _type(e)
        if te in CONTAINERS:
            r = fast_repr(e, te) if _id(e) not in open_ids else None
            if r is None:
                return into(e, out, room, open_ids, depth + 1)
            if _len(r) > vc:
                r = r[:vc] + "..."
        else:
            r = render(e)
        out.append(r)
        return room - _len(r)

    BRACKETS = {list: ("[", "]"), tuple: ("(", ")"), dict: ("{", "}"), set: ("{", "}"),
                frozenset: ("frozenset({", "})")}
    RECURSIVE = {list: "[...]", tuple: "(...)", dict: "{...}", set: "set(...)",
                 frozenset: "frozenset(...)"}

    def exc_message(exc):
        """str(exc) (guarded, capped) for the end record."""
        m = guarded(_type(exc).__str__, exc, "str")
        return m if _len(m) <= vc else m[:vc] + "..."

    # ---------------------------------------------------------------- frames and events

    def getsrc_for(fn):
        if fn == filename:
            def getsrc(lineno):
                return own_lines[lineno - 1] if 0 < lineno <= _len(own_lines) else ""
        else:
            def getsrc(lineno):
                return linecache.getline(fn, lineno).rstrip("\r\n")
        return getsrc

    def as_dict(loc):
        # 3.13+ gives a write-through FrameLocalsProxy; a class body may use any mapping
        # from __prepare__, whose iteration would run user code: treat that as no locals.
        if _type(loc) is proxy_type:
            return loc.copy()
        return {}

    def kept_names(keys):
        """The local names that are reported, in order; fills keyj with their JSON keys.

        Excluded: a comprehension's `.0` and dunders such as a `__class__` cell (and any
        non-str key a class body's namespace might hold).
        """
        names = []
        for k in keys:
            if _type(k) is not str:
                continue
            j = keyj.get(k)
            if j is None:
                j = keyj[k] = ("" if k[:1] == "." or (k[:2] == "__" and k[-2:] == "__")
                               else _enc(k) + ":")
            if j:
                names.append(k)
        return names

    class Frame:
        """Diff state of one traced frame; its bound `trace` is the frame's f_trace.

        Keeping the state on f_trace ties its lifetime to the frame's: a generator keeps its
        state (and ordinal) across resumptions for as long as it lives, and a finished frame's
        state is freed with it, without any frame-keyed table that would pin frames.
        """
        __slots__ = ("ordinal", "head", "info", "lines", "depth", "sdepth", "dstr", "lineno",
                     "keys", "names", "vals", "objs", "snaps", "exc", "fn")

        def __init__(self, info):
            nonlocal ordinal
            ordinal += 1
            self.ordinal = ordinal
            self.head = '"frame":%d' % ordinal + info.head
            self.info = info
            self.lines = info.lines
            self.keys = self.names = None
            self.vals = {}
            self.objs = {}
            self.snaps = {}
            self.exc = False
            self.lineno = info.first
            self.fn = self.naive_trace if naive else self.trace

        def rename(self, keys):
            """Recompute the filtered names after the f_locals keys changed."""
            self.keys = keys
            names = kept_names(keys)
            if names == self.names:
                return ""
            vals, objs = self.vals, self.objs
            if self.names:
                for k in set(self.names).difference(names):
                    del vals[k], objs[k]      # re-emit a name that disappears and comes back
                    self.snaps.pop(k, None)
            for k in names:
                if k not in vals:
                    vals[k] = None
                    objs[k] = MISSING
            self.names = names
            return ',"names":[' + ",".join(map(_enc, names)) + "]"

        def trace(self, frame, event, arg):
            """The hot path: one event of a traced frame, locals diffed against the last one.

            Kept in one function (no helper calls for the common case): per-event overhead is
            what bounds the tracer's throughput.
            """
            nonlocal n_events, n_bytes, flush_at
            try:
                lineno = frame.f_lineno
                if lineno is None:        # 3.12+: artificial instructions have no line
                    lineno = self.lineno
                elif event == "call" and lineno == self.info.first:
                    lineno = self.info.def_line       # decorated: point at the def line
                self.lineno = lineno
                lc = self.lines.get(lineno) or self.info.pair(lineno)
                loc = frame.f_locals
                if _type(loc) is not dict:
                    loc = as_dict(loc)
                keys = _tuple(loc)
                names_part = "" if keys == self.keys else self.rename(keys)
                vals, objs, snaps = self.vals, self.objs, self.snaps
                changed = []
                for name in self.names:
                    v = loc[name]
                    if v is objs[name]:
                        continue          # same immutable object as last time: unchanged
                    tp = _type(v)
                    if tp is int and -BIG < v < BIG:
                        j = '"' + _repr(v) + '"'
                    elif tp is str and _len(v) <= vc:
                        r = _repr(v)
                        j = _enc(r if _len(r) <= vc else r[:vc] + "...")
                    else:
                        # A flat list/tuple/dict whose elements are still the same objects
                        # renders as before: skip the repr (identity checks run in C).
                        snap = snaps.get(name)
                        if (snap is not None and snap[0] is v and _len(v) == snap[1]
                                and _all(_map(_is, snap[2], v if tp is not dict else v.values()))
                                and (tp is not dict or _all(_map(_is, snap[3], v)))):
                            continue
                        j = _enc(render(v))
                        snaps[name] = flat_snapshot(v, tp)
                    objs[name] = v if tp in IMMUTABLE else MISSING
                    if j != vals[name]:
                        vals[name] = j
                        changed.append(keyj[name] + j)
                if event == "line" or event == "call":
                    tail = "}}\n"
                elif event == "return":
                    tail = ('},"value":' + _enc(render(arg))
                            + (',"unwind":true}\n' if self.exc and unwinding(frame, arg)
                               else "}\n"))
                elif event == "exception":
                    tail = ('},"value":' + _enc(render(arg[1])) + ',"exc_type":'
                            + _enc(_qualname(arg[0])) + "}\n")
                else:
                    return self.fn
                self.exc = event == "exception"
                line = (f'{{"event":"{event}",{self.head}{lc[0]}{self.dstr}{lc[1]}{names_part}'
                        f',"locals":{{{",".join(changed)}{tail}')
                # emit(line), inlined
                size = _len(line)
                if n_events >= max_events or n_bytes + size > max_bytes:
                    limit_reached()
                n_events += 1
                n_bytes += size
                buf.append(line)
                if n_bytes >= flush_at:
                    flush_at = n_bytes + CHUNK
                    flush()
            except BaseException as e:
                try:
                    fatal(e)
                except BaseException:
                    pass      # at the very recursion limit even fatal() cannot be called
            return self.fn

        def naive_trace(self, frame, event, arg):
            """Benchmark baseline: plain repr of every local and json.dumps of every event."""
            try:
                lineno = frame.f_lineno
                if event == "call" and lineno == self.info.first:
                    lineno = self.info.def_line
                elif lineno is None:
                    lineno = self.lineno
                self.lineno = lineno
                code = frame.f_code
                ev = {"event": event, "frame": self.ordinal,
                      "func": getattr(code, "co_qualname", code.co_name),
                      "file": code.co_filename, "lineno": lineno, "depth": self.depth,
                      "src": self.info.getsrc(lineno)}
                loc = frame.f_locals
                if _type(loc) is not dict:
                    loc = as_dict(loc)
                names = kept_names(loc)
                ev["names"] = names
                ev["locals"] = {k: plain(loc[k]) for k in names}
                if event == "return":
                    ev["value"] = plain(arg)
                    if self.exc and unwinding(frame, arg):
                        ev["unwind"] = True
                elif event == "exception":
                    ev["value"] = plain(arg[1])
                    ev["exc_type"] = _qualname(arg[0])
                elif event != "line" and event != "call":
                    return self.fn
                self.exc = event == "exception"
                emit(json.dumps(ev, separators=(",", ":")) + "\n")
            except BaseException as e:
                try:
                    fatal(e)
                except BaseException:
                    pass      # at the very recursion limit even fatal() cannot be called
            return self.fn

    def unwinding(frame, arg):
        """A return right after an exception event: is the frame left by that exception?"""
        if arg is not None:
            return False
        try:
            return frame.f_code.co_code[frame.f_lasti] not in _NORMAL_EXITS
        except Exception:
            return True

    def plain(v):
        try:
            r = _repr(v)
        except Exception as e:
            r = "<%s object (repr raised %s)>" % (_qualname(_type(v)), _qualname(_type(e)))
        return r if _len(r) <= vc else r[:vc] + "..."

    def global_trace(frame, event, arg):
        """sys.settrace hook: called for every new (or resumed) frame with event 'call'."""
        try:
            code = frame.f_code
            fn = code.co_filename
            t = file_is_target.get(fn)
            if t is None:
                t = file_is_target[fn] = ((fn in exact_targets or (
                    bool(prefix_targets) and fn.startswith(prefix_targets)))
                    and not (exclude and fn.startswith(exclude)))
            if not t or frame.f_globals is _OWN_GLOBALS:
                return None
            st = None
            ft = frame.f_trace
            if ft is not None and _type(ft) is _MethodType and _type(ft.__self__) is Frame:
                st = ft.__self__              # a generator/coroutine resuming: same ordinal
            if st is None:
                info = infos.get(_id(code))
                if info is None:
                    info = infos[_id(code)] = _CodeInfo(code, getsrc_for(fn))
                    pinned.append(code)
                    if want_functions:
                        function_record(code)
                st = Frame(info)
            # depth = traced frames below this one: the nearest traced caller's depth + 1.
            # sdepth = Python frames on the stack up to this one (for the recursion check).
            depth = 0
            sdepth = 1
            f = frame.f_back
            while f is not None:
                ft = f.f_trace
                if ft is not None and _type(ft) is _MethodType and _type(ft.__self__) is Frame:
                    depth = ft.__self__.depth + 1
                    sdepth += ft.__self__.sdepth
                    break
                sdepth += 1
                f = f.f_back
            st.sdepth = sdepth
            st.depth = depth
            st.dstr = _str(depth)
            if sdepth > _getrec() - RECURSION_MARGIN:
                # Leave the tracer room to report: past this point a RecursionError could
                # hit the trace function itself, and CPython would silently drop tracing.
                raise RecursionError("maximum recursion depth exceeded")
            return st.fn(frame, event, arg)
        except BaseException as e:
            try:
                fatal(e)
            except BaseException:
                pass

    def start():
        nonlocal active
        _signal(_SIGALRM, on_alarm)
        active = True
        _settrace(global_trace)

    def resume():
        """Trace from here on (test runs: one phase of a test).  Unlike start, it leaves the
        SIGALRM handler alone (a test's own alarm must keep working between phases; guarded
        installs and restores its handler per repr), and a forked grandchild never traces."""
        nonlocal active
        if dead:
            return
        active = True
        _settrace(global_trace)

    # ---------------------------------------------------------------- function records

    def function_record(code):
        """Write the `function` record of a code object on its first traced call.

        The block is the code object's own def (decorators included) from the file's AST;
        a lambda, comprehension or generator expression maps to its innermost enclosing def or
        class, or at module level to the top-level statement holding it; a module's code is the
        whole file.  Blocks already written (a lambda inside an already visited def) are not
        repeated.  Unreadable or unparsable files give no record.
        """
        try:
            fn = code.co_filename
            ent = file_index.get(fn, MISSING)
            if ent is MISSING:
                ent = file_index[fn] = index_file(fn)
            if ent is None:
                return
            lines, defs, stmts = ent
            name = code.co_name
            first = code.co_firstlineno
            hit = None
            if name == "<module>":
                hit = ("<module>", 1, _len(lines))
            else:
                d = defs.get((first, name))
                if d is not None:
                    hit = (getattr(code, "co_qualname", d[0]), d[1], d[2])
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
                return
            key = (fn, hit[1], hit[2])
            if key in blocks_seen:
                return
            blocks_seen.add(key)
            text = "".join(lines[hit[1] - 1:hit[2]])
            if text.endswith("\r\n"):
                text = text[:-2]
            elif text.endswith(("\n", "\r")):
                text = text[:-1]
        except Exception:
            return
        record('{"event":"function","file":%s,"qualname":%s,"first":%d,"last":%d,"source":%s}\n'
               % (_enc(fn), _enc(hit[0]), hit[1], hit[2], _enc(text)))

    def index_file(fn):
        """(lines with their endings, {(first, name): (qualname, first, last)}, top-level
        statement ranges) of a source file, or None."""
        try:
            with open(fn, "rb") as fh:
                data = fh.read()
            enc, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
            text = data.decode(enc)
            tree = ast.parse(text, fn)
        except Exception:
            return None
        parts = _NEWLINE_KEEP_RE.split(text)
        lines = [parts[i] + (parts[i + 1] if i + 1 < _len(parts) else "")
                 for i in range(0, _len(parts), 2)]
        if lines and lines[-1] == "":
            lines.pop()
        defs = {}
        kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        todo = [(tree, "")]
        while todo:
            node, prefix = todo.pop()
            for child in ast.iter_child_nodes(node):
                if isinstance(child, kinds):
                    q = prefix + child.name
                    a = min([child.lineno] + [d.lineno for d in child.decorator_list])
                    defs.setdefault((a, child.name), (q, a, child.end_lineno))
                    todo.append((child, q + ("." if isinstance(child, ast.ClassDef)
                                             else ".<locals>.")))
                else:
                    todo.append((child, prefix))
        stmts = [(min([n.lineno] + [d.lineno for d in getattr(n, "decorator_list", ())]),
                  n.end_lineno) for n in tree.body]
        return lines, defs, stmts

    def stop():
        nonlocal active
        active = False
        _settrace(None)

    return types.SimpleNamespace(start=start, stop=stop, resume=resume, end=end,
                                 end_exception=end_exception, finish=finish, render=render,
                                 at_fork_child=at_fork_child, ballast=ballast, emit=emit,
                                 record=record, exc_message=exc_message)


# --------------------------------------------------------------------------------------------
# The item child
# --------------------------------------------------------------------------------------------

def _set_limit(which, soft, hard=None):
    """Lower a resource limit; never try to raise above the inherited hard limit."""
    hard = soft if hard is None else hard
    _, cur_hard = resource.getrlimit(which)
    if cur_hard != resource.RLIM_INFINITY:
        soft, hard = min(soft, cur_hard), min(hard, cur_hard)
    resource.setrlimit(which, (soft, hard))


def _child_setup(req, fds, opts):
    """Process set-up before any user code: session, fds, rlimits, credentials, cwd."""
    os.setsid()                      # own process group: the zygote kills it as a whole
    # Move everything out of the way first so the dup2s below cannot clobber each other.
    high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 100) for fd in fds]
    null = os.open("/dev/null", os.O_RDWR | os.O_CLOEXEC)
    high.append(fcntl.fcntl(null, fcntl.F_DUPFD_CLOEXEC, 100))
    os.dup2(high[0], EVENTS_FD, inheritable=False)   # user-exec'd programs don't inherit it
    os.dup2(high[1], 1)
    os.dup2(high[2], 2)
    os.dup2(high[3], 0)
    nofile_hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if nofile_hard == resource.RLIM_INFINITY or nofile_hard > (1 << 20):
        nofile_hard = 1 << 20
    os.closerange(EVENTS_FD + 1, max(nofile_hard, 4096))

    lim = req["limits"]
    _set_limit(resource.RLIMIT_CORE, 0)
    if lim["as_bytes"] > 0:
        _set_limit(resource.RLIMIT_AS, lim["as_bytes"])
    if lim["cpu_s"] > 0:
        _set_limit(resource.RLIMIT_CPU, lim["cpu_s"], lim["cpu_s"] + 1)
    if lim["nproc"] > 0:
        _set_limit(resource.RLIMIT_NPROC, lim["nproc"])
    if lim["fsize_bytes"] > 0:
        _set_limit(resource.RLIMIT_FSIZE, lim["fsize_bytes"])
    if lim["nofile"] > 0:
        _set_limit(resource.RLIMIT_NOFILE, max(lim["nofile"], EVENTS_FD + 1))

    if opts.drop_uid is not None:
        os.setgroups([])
        os.setresgid(opts.drop_gid, opts.drop_gid, opts.drop_gid)
        os.setresuid(opts.drop_uid, opts.drop_uid, opts.drop_uid)
        if os.getuid() != opts.drop_uid or os.geteuid() != opts.drop_uid:
            raise OSError("uid drop failed")
    os.chdir("/tmp")
    signal.signal(signal.SIGINT, signal.default_int_handler)   # ordinary Python behaviour
    sys.argv = [req["filename"] or req["runner"] or "python"]
    random.seed(req["seed"])


def _item_child(sock, req, fds, opts):
    """Body of the forked item child.  Never returns: every path ends in os._exit."""
    try:
        sock.detach()                # fd 3 is about to become the events pipe
        _child_setup(req, fds, opts)
        tracer = make_tracer(req)
        os.register_at_fork(after_in_child=tracer.at_fork_child)
    except BaseException as e:
        try:
            os.write(2, ("ndtrace: item setup failed: %r\n" % (e,)).encode("utf-8", "replace"))
        finally:
            os._exit(EXIT_SETUP)

    if req["kind"] == "call" and req["pythonpath"]:
        try:
            _extend_path(None, req["pythonpath"])
        except BaseException as e:
            os.write(2, ("ndtrace: python path set-up failed: %r\n" % (e,)).encode("utf-8", "replace"))
            os._exit(EXIT_SETUP)
    if req["kind"] != "call":
        try:
            _run_tests(req, tracer)
        except MemoryError:
            try:
                tracer.ballast.clear()
                tracer.end("memory", exc_type="MemoryError")
                tracer.finish(0)
            except BaseException:
                os._exit(EXIT_NOMEM)
        except BaseException as e:
            try:
                tracer.end("exception", None, "TracerError", "internal tracer error: %r" % (e,))
                tracer.finish(EXIT_TRACER_BUG)
            except BaseException:
                os._exit(EXIT_TRACER_BUG)
        finally:
            os._exit(EXIT_TRACER_BUG)

    try:
        try:
            tree = ast.parse(req["code"], req["filename"])
            code = compile(tree, req["filename"], "exec", dont_inherit=True)
            call = compile(req["call"], "<call>", "eval", dont_inherit=True)
        except MemoryError:
            tracer.ballast.clear()
            tracer.end("memory", exc_type="MemoryError")
            tracer.finish(0)
        except Exception as e:
            msg = str(e)
            vc = max(1, req["limits"]["value_chars"])
            tracer.end("invalid", exc_type=_qualname(type(e)),
                       exc_message=msg if len(msg) <= vc else msg[:vc] + "...")
            tracer.finish(0)

        # The file's top-level statements (decorators included): the debugger's CODE context is
        # made of the blocks that contain visited lines.
        blocks = [[min([n.lineno] + [d.lineno for d in getattr(n, "decorator_list", ())]),
                   n.end_lineno] for n in tree.body]
        tracer.emit('{"event":"blocks","file":%s,"blocks":%s}\n'
                    % (json.dumps(req["filename"]), json.dumps(blocks, separators=(",", ":"))))

        lines = [line + "\n" for line in _NEWLINE_RE.split(req["code"])]
        linecache.cache[req["filename"]] = (len(req["code"]), None, lines, req["filename"])

        # A fresh __main__ module: user classes pickle and dataclasses resolve against the
        # user's namespace, and `import __main__` does not reach the tracer's globals.
        module = types.ModuleType("__main__")
        namespace = module.__dict__
        namespace["__builtins__"] = builtins
        sys.modules["__main__"] = module
        try:
            exec(code, namespace)    # the module body runs untraced
        except BaseException as e:
            tracer.end_exception(e)
            tracer.finish(0)

        sys.setrecursionlimit(sys.getrecursionlimit() + RECURSION_SLACK)
        tracer.start()
        try:
            result = eval(call, namespace)
        except BaseException as e:
            tracer.stop()
            tracer.end_exception(e)
            tracer.finish(0)
        tracer.stop()
        tracer.end("ok", tracer.render(result))
        tracer.finish(0)
    except MemoryError:
        try:
            tracer.ballast.clear()
            tracer.end("memory", exc_type="MemoryError")
            tracer.finish(0)
        except BaseException:
            os._exit(EXIT_NOMEM)
    except BaseException as e:
        try:
            tracer.end("exception", None, "TracerError", "internal tracer error: %r" % (e,))
            tracer.finish(EXIT_TRACER_BUG)
        except BaseException:
            os._exit(EXIT_TRACER_BUG)
    finally:
        os._exit(EXIT_TRACER_BUG)


# --------------------------------------------------------------------------------------------
# Test runs (kind collect / test): a repository's test suite, one test per item
# --------------------------------------------------------------------------------------------

_MISSING_RE = re.compile(r"No module named '([^']+)'")
# Top-level names of the third-party modules the zygote imported for pytest (None: not tried).
_PRELOADED = {"tops": None}


def _run_tests(req, tracer):
    """Body of a collect or test item: never returns."""
    d = req["dir"]
    try:
        os.chdir(d)
    except OSError as e:
        tracer.end("invalid", exc_type=_qualname(type(e)),
                   exc_message="cannot enter %s: %s" % (d, e.strerror))
        tracer.finish(0)
    _purge_preloaded(d, req["pythonpath"])
    _extend_path(d, req["pythonpath"])
    module = types.ModuleType("__main__")
    module.__dict__["__builtins__"] = builtins
    sys.modules["__main__"] = module
    runner = req["runner"]
    if not runner:
        try:
            import pytest  # noqa: F401
            runner = "pytest"
        except Exception:
            runner = "unittest"
    state = types.SimpleNamespace(tests=None, errors=[], missing=None, verdicts=[],
                                  failure=None, fatal=None, code=None)

    def note(exc, when):
        """Remember the first missing module and the first failure of the run."""
        if exc is None:
            return
        if state.missing is None:
            state.missing = _missing_module(exc, d, req["pythonpath"])
        if state.failure is None:
            exc = _unwrap(exc)
            state.failure = (when, _qualname(type(exc)), tracer.exc_message(exc))

    try:
        if runner == "pytest":
            _pytest_run(req, tracer, state, note)
        else:
            _unittest_run(req, tracer, state, note)
    except BaseException as e:          # the runner itself crashed: no verdict
        if req["traced"]:
            tracer.stop()
        tracer.end_exception(e)
        tracer.finish(0)

    missing = state.missing or ""
    if req["kind"] == "collect":
        tracer.record('{"event":"collection","runner":%s,"tests":[%s],"errors":[%s],'
                      '"missing_module":%s}\n'
                      % (_enc(runner), ",".join(map(_enc, state.tests or [])),
                         ",".join(map(_enc, state.errors)), _enc(missing)))
        if state.fatal is not None:
            tracer.end("exception", None, state.fatal[0], state.fatal[1])
        else:
            tracer.end("ok")
        tracer.finish(0)
    outcome = _verdict(state.verdicts)
    when, exc_type, exc_msg = state.failure or ("", "", "")
    if state.fatal is not None and not state.verdicts and state.failure is None:
        when, exc_type, exc_msg = "collect", state.fatal[0], state.fatal[1]
    if outcome not in ("failed", "error"):
        missing = ""
        when = exc_type = exc_msg = ""
    tracer.record('{"event":"test","runner":%s,"outcome":%s,"missing_module":%s,"when":%s,'
                  '"exc_type":%s,"exc_message":%s}\n'
                  % (_enc(runner), _enc(outcome), _enc(missing), _enc(when), _enc(exc_type),
                     _enc(exc_msg)))
    tracer.end("ok")
    tracer.finish(0)


def _verdict(verdicts):
    """One outcome for all the phases/tests a run reported: failed > error > skipped > passed;
    nothing reported (the test was not found or its file did not import) is an error."""
    for v in ("failed", "error"):
        if v in verdicts:
            return v
    if not verdicts:
        return "error"
    if "passed" in verdicts:
        return "passed"
    return "skipped"


def _pytest_run(req, tracer, state, note):
    """Collect or run one test with pytest, in this process."""
    import pytest
    d = req["dir"]
    collect = req["kind"] == "collect"
    conftest = []
    try:       # the reason of a conftest import failure is otherwise only printed
        from _pytest.config import ConftestImportFailure
        orig_init = ConftestImportFailure.__init__

        def init(self, *args, **kwargs):
            orig_init(self, *args, **kwargs)
            conftest.append(self)
        ConftestImportFailure.__init__ = init
    except Exception:
        pass

    class Plugin:
        def pytest_collection_finish(self, session):
            state.tests = _dedup(item.nodeid for item in session.items)

        def pytest_collectreport(self, report):
            if report.failed:
                state.errors.append("%s: %s" % (report.nodeid or ".",
                                                _last_line(report.longreprtext)))

        def pytest_exception_interact(self, node, call, report):
            note(call.excinfo.value if call.excinfo is not None else None, call.when)

        def pytest_runtest_logreport(self, report):
            if report.failed:
                state.verdicts.append("failed" if report.when == "call" else "error")
            elif report.skipped:
                state.verdicts.append("skipped")
            elif report.when == "call":
                state.verdicts.append("passed")

    if req["traced"] and not collect:
        def phase(self, item):
            tracer.resume()
            try:
                yield
            finally:
                tracer.stop()
        wrap = pytest.hookimpl(hookwrapper=True, tryfirst=True)
        Plugin.pytest_runtest_setup = wrap(phase)
        Plugin.pytest_runtest_call = wrap(phase)
        Plugin.pytest_runtest_teardown = wrap(phase)

    common = ["-p", "no:cacheprovider", "--rootdir", d, "--confcutdir", d, "--assert=plain"]
    if collect:
        args = ["--collect-only", "-qq"] + common
    else:
        args = [req["test"], "-q", "-s"] + common
    code = int(pytest.main(args, plugins=[Plugin()]))
    for c in conftest:
        note(c, "collect")
    if code in (3, 4) or (collect and state.tests is None):
        what = {3: "internal error", 4: "usage error"}.get(code, "no collection")
        state.fatal = ("PytestExit", "pytest exited with code %d (%s)" % (code, what))
        if code == 4 and conftest:
            state.fatal = ("PytestExit", "pytest exited with code 4: a conftest.py failed to "
                           "import: %s" % tracer.exc_message(conftest[0]))
    elif not collect and not state.verdicts and state.failure is None:
        state.fatal = ("PytestExit", "pytest exited with code %d: no test matched %r"
                       % (code, req["test"]))


def _unittest_run(req, tracer, state, note):
    """Discover or run one test with unittest, in this process."""
    import unittest
    import unittest.suite
    d = req["dir"]
    loader = unittest.TestLoader()
    if req["kind"] == "collect":
        try:
            suite = loader.discover(d, top_level_dir=d)
        except Exception as e:
            state.fatal = (_qualname(type(e)), tracer.exc_message(e))
            note(e, "collect")
            return
        tests = []

        def walk(s):
            for t in s:
                if isinstance(t, unittest.TestSuite):
                    walk(t)
                elif type(t).__name__ == "_FailedTest":
                    exc = getattr(t, "_exception", None)
                    state.errors.append("%s: %s" % (getattr(t, "_testMethodName", "?"),
                                                    _last_line(_exc_text(exc))))
                    note(exc, "collect")
                else:
                    tests.append(t.id())
        walk(suite)
        state.tests = _dedup(tests)
        return

    class Result(unittest.TestResult):
        """Records one verdict per test (or subtest failure), keeps no tracebacks."""
        def addSuccess(self, test):
            state.verdicts.append("passed")

        def addFailure(self, test, err):
            state.verdicts.append("failed")
            note(err[1], "call")

        def addError(self, test, err):
            # A class/module fixture or an import that failed is an error; an exception in
            # the test (setUp included, as pytest sees it) is a failure.
            fixture = (isinstance(test, unittest.suite._ErrorHolder)
                       or type(test).__name__ == "_FailedTest")
            state.verdicts.append("error" if fixture else "failed")
            note(err[1], "setup" if fixture else "call")

        def addSkip(self, test, reason):
            state.verdicts.append("skipped")

        def addExpectedFailure(self, test, err):
            state.verdicts.append("skipped")

        def addUnexpectedSuccess(self, test):
            state.verdicts.append("failed")

        def addSubTest(self, test, subtest, err):
            if err is not None:
                state.verdicts.append("failed")
                note(err[1], "call")

    try:
        suite = loader.loadTestsFromName(req["test"])
    except Exception as e:
        state.verdicts.append("error")
        note(e, "collect")
        return
    result = Result()
    if req["traced"]:
        tracer.resume()
    try:
        suite.run(result)
    finally:
        if req["traced"]:
            tracer.stop()
    if not state.verdicts:
        state.fatal = ("LookupError", "no test matched %r" % (req["test"],))


def _unwrap(exc):
    """The exception a pytest wrapper (a collection error, a conftest import failure) stands for."""
    for _ in range(10):
        name = _qualname(type(exc)).rsplit(".", 1)[-1]
        if name == "CollectError" and isinstance(exc.__cause__, BaseException):
            exc = exc.__cause__
        elif name == "ConftestImportFailure":
            ei = getattr(exc, "excinfo", None)
            inner = ei[1] if type(ei) is tuple and len(ei) > 1 else getattr(exc, "cause", None)
            if not isinstance(inner, BaseException):
                break
            exc = inner
        else:
            break
    return exc


def _dedup(names):
    seen = set()
    out = []
    for n in names:
        if type(n) is str and n not in seen:
            seen.add(n)
            out.append(n)
    return out


def _exc_text(exc):
    """The message of an exception, without running user code where possible."""
    if exc is None:
        return ""
    msg = getattr(exc, "msg", None)        # ImportError's message
    if type(msg) is str:
        return msg
    try:
        return BaseException.__str__(exc)
    except BaseException:
        return ""


def _last_line(text):
    lines = [ln.strip() for ln in str(text).splitlines() if ln.strip()]
    return lines[-1][:1000] if lines else ""


def _missing_module(exc, d, pythonpath):
    """The top-level name of a module whose import failed with ModuleNotFoundError and that
    the repository does not contain (a missing dependency), following the exception chain."""
    seen = set()
    todo = [exc]
    while todo:
        e = todo.pop(0)
        if e is None or id(e) in seen or not isinstance(e, BaseException):
            continue
        seen.add(id(e))
        name = getattr(e, "name", None) if isinstance(e, ModuleNotFoundError) else None
        if type(name) is not str or not name:
            m = _MISSING_RE.search(_exc_text(e))
            name = m.group(1) if m else None
        if name:
            top = name.split(".")[0]
            if top and not _in_repo(d, top, pythonpath):
                return top
        todo += [getattr(e, "__cause__", None), getattr(e, "__context__", None),
                 getattr(e, "cause", None)]
        ei = getattr(e, "excinfo", None)          # pytest's ConftestImportFailure
        if type(ei) is tuple and len(ei) > 1:
            todo.append(ei[1])
    return None


def _in_repo(d, top, pythonpath):
    """Whether the checkout holds a module or package `top` (a few levels deep)."""
    skip = tuple(p.rstrip("/") + "/" for p in pythonpath)
    walked = 0
    for root, dirs, files in os.walk(d):
        walked += 1
        if walked > 2000:
            return False
        if top + ".py" in files:
            return True
        if top in dirs:
            try:
                if any(f.endswith(".py") for f in os.listdir(os.path.join(root, top))):
                    return True
            except OSError:
                pass
        depth = root[len(d):].count("/")
        dirs[:] = [] if depth >= 3 else sorted(
            x for x in dirs if not x.startswith(".") and x not in
            ("site-packages", "dist-packages", "node_modules", "__pycache__")
            and not (os.path.join(root, x) + "/").startswith(skip))
    return False


def _extend_path(d, pythonpath):
    """sys.path = [dir (if given)] + standard library + the PythonPath site dirs (with their .pth files)
    + the interpreter's own site/dist-packages."""
    import site
    before = [p for p in sys.path if p != d]
    for p in pythonpath:
        site.addsitedir(p)
    added = [p for p in sys.path if p not in before and p != d]
    at = next((i for i, p in enumerate(before)
               if p.endswith(("site-packages", "dist-packages"))), len(before))
    sys.path[:] = ([d] if d else []) + before[:at] + added + before[at:]


def _preload(req):
    """Zygote only: import the interpreter's own pytest once, before the first pytest item is
    forked, so items do not pay for it.  Only code under the interpreter's prefix runs here:
    the zygote's sys.path holds neither the repository nor any PythonPath entry."""
    if _PRELOADED["tops"] is not None or req["kind"] == "call" or req["runner"] == "unittest":
        return
    before = set(sys.modules)
    tops = set()
    try:
        import unittest  # noqa: F401
        import pytest  # noqa: F401
    except BaseException:
        for name in set(sys.modules) - before:
            sys.modules.pop(name, None)
    else:
        for name in set(sys.modules) - before:
            f = getattr(sys.modules.get(name), "__file__", None)
            if type(f) is str and "-packages/" in f:
                tops.add(name.split(".")[0])
    _PRELOADED["tops"] = frozenset(tops)
    gc.collect()
    gc.freeze()


def _purge_preloaded(d, pythonpath):
    """Item child: forget the preloaded pytest (and its dependencies) when the repository or a
    PythonPath entry has its own copy of any of them, so that copy is the one imported."""
    tops = _PRELOADED["tops"]
    if not tops:
        return
    bases = [d, os.path.join(d, "src")] + list(pythonpath)
    if any(os.path.exists(os.path.join(b, t)) or os.path.exists(os.path.join(b, t + ".py"))
           for b in bases for t in tops):
        for name in list(sys.modules):
            if name.split(".")[0] in tops:
                del sys.modules[name]


# --------------------------------------------------------------------------------------------
# The zygote
# --------------------------------------------------------------------------------------------

class ProtocolError(Exception):
    """A malformed control message; the zygote replies with an error and goes on."""


def send(sock, obj):
    """Send one framed message; False when Go has gone away (the caller then winds down)."""
    data = json.dumps(obj, separators=(",", ":")).encode("ascii")
    try:
        sock.sendall(struct.pack(">I", len(data)) + data)
        return True
    except OSError:
        return False


def _recv_exact(sock, n):
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise EOFError("control socket closed")
        got += k
    return bytes(buf)


def read_message(sock):
    """Read one framed message: returns (message or None, fds, error or None).

    The run request's fds ride on the first byte of the length header, so the header is read
    with recv_fds (at most 4 bytes: never past this message) and the rest with plain recvs.
    Raises EOFError/OSError when the socket is gone.
    """
    data, fds, flags, _ = socket.recv_fds(sock, 4, 3)
    if not data:
        _close_all(fds)
        raise EOFError("control socket closed")
    if len(data) < 4:
        data += _recv_exact(sock, 4 - len(data))
    (size,) = struct.unpack(">I", data)
    if size > MAX_MESSAGE:
        while size:                       # keep the stream in sync, then reject
            size -= len(_recv_exact(sock, min(size, 1 << 20)))
        return None, fds, "message too large"
    body = _recv_exact(sock, size)
    if flags & getattr(socket, "MSG_CTRUNC", 0):
        return None, fds, "too many file descriptors"
    try:
        msg = json.loads(body)
    except Exception as e:
        return None, fds, "malformed JSON: %s" % (e,)
    if type(msg) is not dict or type(msg.get("op")) is not str:
        return None, fds, "message is not an object with an op"
    return msg, fds, None


def _close_all(fds):
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def validate_run(msg, fds):
    """Check a run request and fill in missing limits; raises ProtocolError."""
    def need(key, *types_):
        v = msg.get(key)
        if type(v) not in types_:
            raise ProtocolError("run: %r missing or of the wrong type" % key)
        return v
    if len(fds) != 3:
        raise ProtocolError("run: expected 3 file descriptors, got %d" % len(fds))
    need("id", int)
    kind = msg.get("kind", "call")
    if kind not in ("call", "collect", "test"):
        raise ProtocolError("run: unknown kind %r" % (kind,))
    if kind == "call":
        need("code", str)
        need("filename", str)
        need("call", str)
    else:
        if type(msg.get("dir")) is not str or not msg["dir"].startswith("/"):
            raise ProtocolError("run: dir must be an absolute path")
        if msg.get("runner", "") not in ("", "pytest", "unittest"):
            raise ProtocolError("run: unknown runner %r" % (msg.get("runner"),))
        if kind == "test" and (type(msg.get("test")) is not str or not msg["test"]):
            raise ProtocolError("run: test must be a non-empty string")
        if type(msg.get("traced", False)) is not bool:
            raise ProtocolError("run: traced must be a boolean")
    targets = need("targets", list)
    if not all(type(t) is str and t for t in targets):
        raise ProtocolError("run: targets must be non-empty strings")
    for key in ("exclude", "pythonpath"):
        v = msg.get(key) or []
        if type(v) is not list or not all(type(t) is str and t.startswith("/") for t in v):
            raise ProtocolError("run: %s must be a list of absolute paths" % key)
    if type(msg.get("seed", 0)) not in (int, str, float, type(None)):
        raise ProtocolError("run: bad seed")
    if type(msg.get("naive", False)) is not bool:
        raise ProtocolError("run: naive must be a boolean")
    limits = dict(DEFAULT_LIMITS)
    given = msg.get("limits", {})
    if type(given) is not dict:
        raise ProtocolError("run: limits must be an object")
    for k, v in given.items():
        if k in limits:
            if type(v) is not int:
                raise ProtocolError("run: limit %r must be an integer" % k)
            limits[k] = v
    return {"id": msg["id"], "kind": kind, "code": msg.get("code", ""),
            "filename": msg.get("filename", ""), "call": msg.get("call", ""),
            "targets": targets, "seed": msg.get("seed", 0),
            "naive": msg.get("naive", False), "limits": limits,
            "dir": msg.get("dir", ""), "runner": msg.get("runner", ""),
            "test": msg.get("test", ""), "traced": msg.get("traced", False),
            "exclude": msg.get("exclude") or [], "pythonpath": msg.get("pythonpath") or []}


def _signal_group(pid):
    """SIGKILL the item's process group and the item itself (it may not have setsid yet)."""
    for kill, target in ((os.killpg, pid), (os.kill, pid)):
        try:
            kill(target, signal.SIGKILL)
        except OSError:
            pass


def _has_exited(pid):
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def supervise(sock, req, pid, started):
    """Wait for the item to exit, a kill for it, or its wall-clock deadline.

    Returns (reason, exit_zygote).  The child is left as a zombie (not reaped) so its pid and
    process-group id stay reserved until the caller has killed the group.
    """
    try:
        pidfd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        pidfd = None                      # fall back to polling waitid
    deadline = started + max(req["limits"]["wall_ms"], 1) / 1000.0
    reason, exit_zygote = "exited", False
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                reason = "timeout"
                break
            watch = [sock] if pidfd is None else [sock, pidfd]
            ready, _, _ = select.select(watch, [], [],
                                        remaining if pidfd is not None else min(remaining, 0.005))
            if (pidfd in ready) if pidfd is not None else _has_exited(pid):
                break
            if sock not in ready:
                continue
            try:
                msg, fds, err = read_message(sock)
            except (EOFError, OSError):
                reason, exit_zygote = "killed", True      # Go is gone: stop everything
                break
            reply = None
            _close_all(fds)
            if err is not None:
                reply = {"op": "error", "message": err}
            elif msg["op"] == "kill":
                if msg.get("id") == req["id"]:
                    reason = "killed"
                    break                 # a kill for another (finished) item is stale
            elif msg["op"] == "exit":
                reason, exit_zygote = "killed", True
                break
            elif msg["op"] == "run":
                reply = {"op": "error", "message": "busy: item %r is running" % req["id"],
                         "id": msg.get("id")}
            else:
                reply = {"op": "error", "message": "unknown op %r" % msg["op"]}
            if reply is not None and not send(sock, reply):
                reason, exit_zygote = "killed", True
                break
    finally:
        if pidfd is not None:
            os.close(pidfd)
    if reason != "exited":
        _signal_group(pid)
    return reason, exit_zygote


def empty_dir(path, mode=None):
    """Remove every entry under path (fd-relative, never following symlinks).

    Returns True when the directory ends up empty (and, if mode is given, has that mode
    again: an item running as the namespace's root could have chmod-ed /tmp itself).
    Subdirectories the item made unreadable or unwritable are chmod-ed and retried.
    """
    try:
        dfd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    try:
        if mode is not None and stat.S_IMODE(os.fstat(dfd).st_mode) != mode:
            os.chmod(dfd, mode)
        _remove_entries(dfd, 0)
        return not os.listdir(dfd)
    except (OSError, RecursionError):
        return False
    finally:
        os.close(dfd)


def _remove_entries(dfd, depth):
    if depth > 200:
        raise OSError("directory tree too deep")
    for name in os.listdir(dfd):
        try:
            st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
        except FileNotFoundError:
            continue
        if not stat.S_ISDIR(st.st_mode):
            try:
                os.unlink(name, dir_fd=dfd)
            except FileNotFoundError:
                pass
            except PermissionError:
                if depth == 0:
                    raise            # never loosen /tmp itself
                os.chmod(dfd, 0o700)     # the item locked this directory
                os.unlink(name, dir_fd=dfd)
            continue
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
        try:
            sub = os.open(name, flags, dir_fd=dfd)
        except PermissionError:
            os.chmod(name, 0o700, dir_fd=dfd)
            sub = os.open(name, flags, dir_fd=dfd)
        try:
            try:
                _remove_entries(sub, depth + 1)
            except PermissionError:
                os.chmod(sub, 0o700)
                _remove_entries(sub, depth + 1)
        finally:
            os.close(sub)
        os.rmdir(name, dir_fd=dfd)


def _kill_namespace(timeout=5.0):
    """--own-pidns only: SIGKILL every other process in our PID namespace and reap them all.

    kill(-1) from inside a private PID namespace reaches exactly the item's leftovers
    (daemons that left its process group, fork bombs); outside one it would hit the whole
    host, hence the flag.  Orphans are reparented to us (PID 1 of the namespace), so "no
    children left" means "nothing left".  A fork racing the kill can escape one round, so
    repeat until empty; False if something survives the timeout (Go recycles the sandbox).
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            # No children of ours is left.  Under bubblewrap PID 1 is bwrap, not us: orphans
            # were reparented to it and linger as zombies until it reaps them, so wait until
            # /proc shows nobody but PID 1 and us.
            if not _others_in_namespace():
                return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)


def _others_in_namespace():
    """The pids in /proc other than PID 1 and this process (zombies included)."""
    me = os.getpid()
    try:
        return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) not in (1, me)]
    except OSError:
        return []


def run_item(sock, msg, fds, opts):
    """Handle one `run`: fork, supervise, reap, clean up, report.  Returns True to exit."""
    try:
        req = validate_run(msg, fds)
    except ProtocolError as e:
        _close_all(fds)
        reply = {"op": "error", "message": str(e)}
        if type(msg.get("id")) is int:
            reply["id"] = msg["id"]
        return not send(sock, reply)

    _preload(req)
    started = time.monotonic()
    try:
        pid = os.fork()
    except OSError as e:
        _close_all(fds)
        return not send(sock, {"op": "error", "message": "fork failed: %s" % (e,),
                               "id": req["id"]})
    if pid == 0:
        try:
            _item_child(sock, req, fds, opts)
        finally:
            os._exit(EXIT_SETUP)
    _close_all(fds)                   # only the child holds the pipes' write ends now

    reason, exit_zygote = supervise(sock, req, pid, started)
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)     # zombie: pgid still reserved
    wall_ms = int((time.monotonic() - started) * 1000)
    try:
        os.killpg(pid, signal.SIGKILL)   # whatever the item left in its process group
    except OSError:
        pass
    _, status, usage = os.wait4(pid, 0)
    all_gone = _kill_namespace() if opts.own_pidns else True
    exit_code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
    sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    clean = empty_dir("/tmp", opts.tmp_mode) and all_gone
    sent = send(sock, {"op": "done", "id": req["id"], "reason": reason, "exit_code": exit_code,
                       "signal": sig, "wall_ms": wall_ms,
                       "cpu_ms": int((usage.ru_utime + usage.ru_stime) * 1000),
                       "max_rss_kb": usage.ru_maxrss, "clean": clean})
    return exit_zygote or not sent


def parse_args(argv):
    p = argparse.ArgumentParser(prog="ndtrace-zygote", add_help=False)
    p.add_argument("--ctrl-fd", type=int, required=True)
    p.add_argument("--own-pidns", action="store_true")
    p.add_argument("--drop-uid", type=int)
    p.add_argument("--drop-gid", type=int)
    opts = p.parse_args(argv)
    if (opts.drop_uid is None) != (opts.drop_gid is None):
        p.error("--drop-uid and --drop-gid go together")
    # Defence in depth: kill(-1) outside a private PID namespace would hit the whole host. In
    # one, the zygote is PID 1 (namespaces backend) or 2 (bubblewrap's init is PID 1).
    if opts.own_pidns and os.getpid() > 2:
        p.error("--own-pidns given, but this process (pid %d) is not at the top of a fresh PID "
                "namespace" % os.getpid())
    return opts


def main(argv):
    opts = parse_args(argv)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sock = socket.socket(fileno=opts.ctrl_fd)
    sock.settimeout(None)
    try:
        opts.tmp_mode = stat.S_IMODE(os.stat("/tmp").st_mode)   # restored after every item
    except OSError:
        opts.tmp_mode = None
    gc.collect()
    gc.freeze()                   # fewer copy-on-write faults in the forked children
    if not send(sock, {"op": "ready", "python": platform.python_version(), "pid": os.getpid()}):
        return 0
    while True:
        try:
            msg, fds, err = read_message(sock)
        except (EOFError, OSError):
            return 0
        if err is not None:
            _close_all(fds)
            if not send(sock, {"op": "error", "message": err}):
                return 0
            continue
        op = msg["op"]
        if op == "run":
            if run_item(sock, msg, fds, opts):
                return 0
            continue
        _close_all(fds)
        if op == "exit":
            return 0
        if op != "kill" and not send(sock, {"op": "error", "message": "unknown op %r" % op}):
            return 0                  # (a kill while idle is stale: ignored)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
