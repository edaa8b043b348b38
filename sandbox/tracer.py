"""ndtrace sandbox zygote and line tracer.

This file is embedded in the Go binary and started inside the sandbox as

    python3 -s -B -P -c <this file> --ctrl-fd 3 --support /.ndtrace --ro PATH... [--own-pidns]
            [--drop-uid UID --drop-gid GID] [--cgroup-fd N] [--tmp-bytes N] [--shm-bytes N]

It is the long-lived *zygote*: it imports everything once, then forks a fresh process tree per
`run` request, so an item costs a few fork()s instead of a sandbox and interpreter start-up.  The
contract with the Go side is docs/tracer-protocol.md, the isolation is docs/sandbox.md; the
comments below only explain the why.

Per item:  zygote -> keeper (new user, mount, PID and IPC namespaces) -> item init (PID 1 there:
its own /proc, /tmp, /dev/shm, IPC limits) -> item (a user namespace of its own that owns
nothing, no capabilities, no_new_privs, Landlock, seccomp, then the request, the tracer and the
traced code).  The zygote never sees an item's code or inputs (they come on the item's own
pipe), is non-dumpable, and holds the control socket no item can reach.

Trust model.  The zygote never executes user code, never unpickles and only speaks JSON.  The
item runs untrusted code in the same process as the tracer, so everything it writes is untrusted
until proven otherwise: the tracer seals its output with an HMAC chain keyed per item, keeps its
state out of reach of the traced code (see make_tracer), and a native audit hook reports any
attempt to reach it as `tampered`; Go checks the seals and every event against the source.

Standard library and the sandbox's own native helper (sandbox/native) only; works on CPython
3.11, 3.12 and 3.13.
"""

import _thread
import argparse
import ast
import builtins
import fcntl
import gc
import importlib.machinery
import importlib.util
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
import struct
import sys
import time
import tokenize
import types

try:
    import _signal as _csignal   # getsignal/signal without signal.py's enum wrapping (faster)
except ImportError:              # pragma: no cover - not CPython
    _csignal = signal
try:
    from _hashlib import hmac_digest as _hmac_digest   # OpenSSL, in C: nothing to rebind
except ImportError:              # pragma: no cover - no OpenSSL
    from hmac import digest as _hmac_digest

EVENTS_FD = 3                 # the events pipe in the item
REQUEST_FD = 4                # the item's request pipe, read and closed before any user code
SYNC_FDS = (5, 6)             # the item's handshake with its init, closed before any user code
MAX_MESSAGE = 64 << 20        # control-socket and request message cap
CHUNK = 64 << 10              # event buffer flush (and seal) threshold
RECURSION_SLACK = 100         # extra recursion depth for the tracer's own frames
RECURSION_MARGIN = 30         # the trace ends this close to the limit (the tracer needs room)
NEST_LIMIT = 40               # container nesting rendered before giving up (recursion safety)
MAX_NAMES = 4096              # local names one frame may report (Go's decoder has the same cap)
MAX_LINE = 8 << 20            # bytes of one record line (Go takes at most 16 MiB unsealed)
CODE_UID = 1000               # the item's uid in its own user namespace

# Exit codes of an item that could not finish normally (Go sees them in `done`).
EXIT_TRACER_BUG = 70          # internal tracer error; an end record was attempted
EXIT_PIPE = 71                # the events pipe is unwritable: nothing more can be reported
EXIT_TAMPERED = 72            # tampering detected where no end record could be written
EXIT_SETUP = 97               # the item failed before user code ran (namespaces, fds, limits)
EXIT_NOMEM = 99               # MemoryError even while writing the end record

DEFAULT_LIMITS = {"wall_ms": 10000, "cpu_s": 10, "as_bytes": 2 << 30, "nproc": 64,
                  "fsize_bytes": 64 << 20, "nofile": 256, "max_events": 100000,
                  "max_trace_bytes": 64 << 20, "value_chars": 1000, "repr_ms": 100}

# Modules traced code may not import: ctypes would give it raw memory (the tracer's included);
# _signal would give back the signal functions the tracer routes through itself.  Importing the
# sandbox's helper is tampering.
DENIED_IMPORTS = ("ctypes", "_ctypes", "_signal")
TAMPER_IMPORTS = ("_ndtrace_native",)

# Namespace and mount flags (linux/sched.h, linux/mount.h).
CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID = 0x20000, 0x8000000, 0x10000000, 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18

_N = None                     # the native helper (sandbox/native), loaded by main()

_enc = json.encoder.encode_basestring_ascii      # C encoder: str -> quoted, ASCII-only JSON
_type_qualname = type.__dict__["__qualname__"].__get__   # bypasses metaclass overrides
_ADDR_RE = re.compile(r"0x[0-9a-fA-F]{6,}")
_DEF_RE = re.compile(r"(?:async\s+def|def|class)\b")
_NEWLINE_RE = re.compile(r"\r\n|\r|\n")          # the line breaks the tokenizer counts
_NEWLINE_KEEP_RE = re.compile(r"(\r\n|\r|\n)")  # the same, kept by re.split
# Where f_lasti points when a frame returns or yields normally; anything else after an
# exception event means the frame is being unwound (3.12+ report a StopIteration caught by
# `yield from`/`await` as an exception event followed by a normal return).
_NORMAL_EXITS = frozenset(opcode.opmap[name] for name in
                          ("RETURN_VALUE", "RETURN_CONST", "YIELD_VALUE", "RESUME")
                          if name in opcode.opmap)


def _qualname(tp):
    """Type name for placeholders and exc_type, without running user code (zygote side)."""
    try:
        name = _type_qualname(tp)
        return name if type(name) is str else "?"
    except Exception:
        return "?"


class _ReprTimeout(BaseException):
    """Raised by the SIGALRM handler inside a guarded user __repr__ that ran too long."""


def _signal_dispatcher(in_tracer, handlers, defer, sig_dfl):
    """The Python handler the item installs for every signal traced code handles.

    A handler must never be handed a frame of the tracer, nor a frame whose callers are (the
    tracer's locals hold its state): a signal that arrives while the tracer runs is deferred, and
    the trace entry point's native wrapper raises it again once the tracer has returned, so the
    handler runs in the traced code.  It lives outside make_tracer on purpose: a handler's own
    frame has it as caller, so its frame holds only opaque callables and the handlers' table."""
    def dispatch(signum, frame):
        if in_tracer(frame):
            defer(signum)
            return
        h = handlers.get(signum)
        if h is not None and h is not sig_dfl:
            h(signum, frame)
    return dispatch


class _CodeInfo:
    """Per-code-object constants: the JSON prefix of func/file and pre-encoded source lines.

    Data only: the tracer fills it (make_tracer's code_info).  Classes are reachable from any
    code through object.__subclasses__(), so no class of this file has methods that reach the
    tracer's state."""
    __slots__ = ("head", "first", "def_line", "lines", "getsrc")


class _FrameState:
    """Diff state of one traced frame (data only, filled and used by make_tracer's closures).

    Its opaque trace callable `op` is the frame's f_trace: the state lives as long as the frame
    (a generator keeps its ordinal across resumptions), and traced code that reads f_trace gets a
    callable that exposes nothing."""
    __slots__ = ("ordinal", "head", "info", "lines", "depth", "sdepth", "dstr", "lineno",
                 "keys", "names", "vals", "objs", "snaps", "exc", "op", "fid")


# --------------------------------------------------------------------------------------------
# The tracer (item process only)
# --------------------------------------------------------------------------------------------

def make_tracer(req, key, native):
    """Build the per-item tracer; called once, in the item process, before any user code.

    Traced code shares this process, so the tracer is written to be *unreachable* from it:
    every function below uses only its closure (never a module global or a builtin looked up at
    run time: a selfcheck test verifies the bytecode), the callables traced code can see
    (frame.f_trace, sys.gettrace(), the signal handler, the functions handed to the item's
    bottom frames) are native opaque wrappers, the functions that write to the events channel
    check that their caller is the tracer's own code, and everything written is sealed with an
    HMAC chain under `key` (docs/tracer-protocol.md), so bytes traced code writes to the events
    descriptor are detected by Go.  The native audit hook (installed by the caller) calls
    on_tamper(reason) on any attempt to reach the tracer; it seals a `tampered` end record and
    exits.  Returns a namespace of opaque entry points for the item's bottom code.
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

    # Everything the closures below call is bound here, before traced code can rebind a
    # module attribute, a builtin or a global of this file.
    _repr, _type, _len, _tuple, _str, _id = repr, type, len, tuple, str, id
    _min, _max, _sum, _map, _set, _issubclass = min, max, sum, map, set, issubclass
    _getattr, _range, _list, _bytes, _dict = getattr, range, list, bytes, dict
    _BaseException, _Exception, _ValueError = BaseException, Exception, ValueError
    _MemoryError, _RecursionError, _ReprTimeout_ = MemoryError, RecursionError, _ReprTimeout
    _write, _settrace, _gettrace = os.write, sys.settrace, sys.gettrace
    _exit, _close, _getpid = os._exit, os.close, os.getpid
    _getrec, _setrec = sys.getrecursionlimit, sys.setrecursionlimit
    _getframe = sys._getframe
    _setitimer, _getsignal, _signal = signal.setitimer, _csignal.getsignal, _csignal.signal
    _ITIMER, _SIGALRM, _SIG_DFL = signal.ITIMER_REAL, signal.SIGALRM, signal.SIG_DFL
    _monotonic = time.monotonic
    _get_ident = _thread.get_ident
    _hmac = _hmac_digest
    _enc_ = _enc
    _type_qualname_ = _type_qualname
    _ADDR_SUB = _ADDR_RE.sub
    _DEF_MATCH = _DEF_RE.match
    _NL_SPLIT, _NLK_SPLIT = _NEWLINE_RE.split, _NEWLINE_KEEP_RE.split
    _NORMAL_EXITS_ = _NORMAL_EXITS
    _join = "".join
    _CodeInfo_, _FrameState_ = _CodeInfo, _FrameState
    _opaque, _trusted, _defer_signal = native.opaque, native.trusted_caller, native.defer_signal
    _lost_events = native.lost_events
    _open = io.open
    _BytesIO = io.BytesIO
    _detect_encoding = tokenize.detect_encoding
    _compile, _ONLY_AST = compile, ast.PyCF_ONLY_AST
    _DEF_NODES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    _ClassDef, _AST = ast.ClassDef, ast.AST
    _isinstance = isinstance
    _dumps = json.dumps
    _std_flush = tuple(s.flush for s in (sys.__stdout__, sys.__stderr__) if s is not None)
    IMMUTABLE = frozenset((int, float, complex, bool, type(None), str, bytes))
    SCALARS = frozenset((float, complex, bool, type(None)))
    CONTAINERS = frozenset((list, tuple, dict, set, frozenset))
    INTS = frozenset((int, bool))
    FLOATS = frozenset((float, bool, type(None)))
    STRS = frozenset((str,))
    _int, _bytearray, _frozenset, _memoryview = int, bytearray, frozenset, memoryview
    _callable, _OSError, _bool = callable, OSError, bool
    _EVENTS_FD, _EXIT_PIPE, _CHUNK, _EXIT_TAMPERED = EVENTS_FD, EXIT_PIPE, CHUNK, EXIT_TAMPERED
    _EXIT_NOMEM, _EXIT_TRACER_BUG, _RECURSION_MARGIN = EXIT_NOMEM, EXIT_TRACER_BUG, RECURSION_MARGIN
    _MAX_NAMES, _MAX_LINE = MAX_NAMES, MAX_LINE
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
    flush_at = _CHUNK
    seal_prev = [b"\0" * 32]  # the HMAC chain: the previous chunk's tag
    ordinal = 0
    dead = False            # set in forked grandchildren: never write anything
    active = False          # tracing is installed (user reprs may remove it)
    busy = False            # a trace function of ours is running on the traced thread
    finished = False        # the run is being ended (tampering): the trace functions stand down
    lost = False            # CPython switched tracing off by itself during the run
    guard = False           # a guarded user repr is running: SIGALRM raises
    main_ident = _get_ident()
    user_handlers = {}      # signum -> the handler traced code installed
    ballast = [bytearray(256 << 10)]   # released on MemoryError to write the end record
    addresses = {}          # '0x7f..' -> '0x1', per trace
    slow = {}               # id -> object whose repr timed out once: not retried at every event
    keyj = {}               # local name -> '"name":' ('' when the name is excluded)
    infos = {}              # id(code) -> _CodeInfo
    pinned = []             # keeps traced code objects alive so their ids stay unique
    states = {}             # id(op) -> _FrameState of every traced frame (ops kept alive)
    file_is_target = {}     # co_filename -> bool
    file_index = {}         # co_filename -> (lines, defs, stmts) or None (function records)
    file_lines = {}         # co_filename -> its lines (event sources outside the main file)
    blocks_seen = set()     # (file, first, last) of the function records written
    try:
        proxy_type = type(sys._getframe().f_locals)       # FrameLocalsProxy on 3.13+
    except Exception:
        proxy_type = dict

    # ---------------------------------------------------------------- output

    def flush():
        """Seal the buffered lines (HMAC chain) and write them with os.write."""
        if dead:
            buf.clear()
            return
        data = _join(buf).encode("ascii", "backslashreplace")
        buf.clear()
        tag = _hmac(key, seal_prev[0] + data, "sha256")
        seal_prev[0] = tag
        view = _memoryview(data + b"#" + tag.hex().encode("ascii") + b"\n")
        try:
            while view:
                view = view[_write(_EVENTS_FD, view):]
        except _OSError:
            _exit(_EXIT_PIPE)

    def emit(line):
        """Append one event line, enforcing max_events / max_trace_bytes."""
        nonlocal n_events, n_bytes, flush_at
        if n_events >= max_events or n_bytes + _len(line) > max_bytes or _len(line) > _MAX_LINE:
            limit_reached()
        n_events += 1
        n_bytes += _len(line)
        buf.append(line)
        if n_bytes >= flush_at:
            flush_at = n_bytes + _CHUNK
            flush()

    def record(line):
        """Append one non-event record (function, test, collection): counts bytes, not events."""
        nonlocal n_bytes, flush_at
        if n_bytes + _len(line) > max_bytes or _len(line) > _MAX_LINE:
            limit_reached()
        n_bytes += _len(line)
        buf.append(line)
        if n_bytes >= flush_at:
            flush_at = n_bytes + _CHUNK
            flush()

    def end(status, value=None, exc_type=None, exc_message=None):
        """Write the end record and flush it sealed; the caller exits."""
        nonlocal active, lost
        if active:
            if _gettrace() is not op_global and not finished:
                lost = True
            active = False
            _settrace(None)
        if (lost or _lost_events()) and (status == "ok" or status == "exception"):
            # Events are missing where the trace function could not be called (the recursion
            # limit reached in untraced code): not a record of the whole run.
            status, value, exc_type = "event_limit", None, None
            exc_message = ("trace incomplete: the trace function could not be called at the "
                           "recursion limit")
        parts = ['{"event":"end","status":"', status, '"']
        if value is not None:
            parts += [',"value":', _enc_(value)]
        if exc_type is not None:
            parts += [',"exc_type":', _enc_(exc_type)]
        if exc_message is not None:
            parts += [',"exc_message":', _enc_(exc_message)]
        parts.append(',"events":%d}\n' % n_events)
        buf.append(_join(parts))
        flush()

    def finish(code=0):
        """Flush the interpreter's own stdout/stderr buffers and leave without cleanup."""
        for f in _std_flush:
            try:
                f()
            except _BaseException:
                pass
        _exit(code)

    def limit_reached():
        end("event_limit")
        finish(0)

    def on_tamper(reason):
        """Called by the native audit hook (and by the tracer's own checks) when traced code
        tries to reach the tracer: drop whatever is buffered, seal a `tampered` end record and
        exit.  In a process the item forked (it has no events channel) just exit."""
        nonlocal active, finished
        if dead:
            _exit(_EXIT_TAMPERED)
        finished = True               # the trace functions do nothing from now on
        try:
            active = False
            try:
                _settrace(None)       # refused by CPython inside the sys.settrace audit event
            except _BaseException:
                pass
            buf.clear()
            end("tampered", exc_message=reason if _type(reason) is _str else "tampering")
            finish(0)
        except _BaseException as e:
            try:
                _write(2, ("ndtrace: reporting tampering failed: %s\n" % _repr(e)).encode())
            finally:
                _exit(_EXIT_TAMPERED)
        _exit(_EXIT_TAMPERED)

    def tampering(what):
        on_tamper(what)

    def qualname(tp):
        try:
            name = _type_qualname_(tp)
            return name if _type(name) is _str else "?"
        except _Exception:
            return "?"

    def end_exception(exc):
        """End record for an exception that escaped the module body or the call."""
        if _issubclass(_type(exc), _MemoryError):
            ballast.clear()
            end("memory", exc_type="MemoryError")
        else:
            end("exception", render(exc), qualname(_type(exc)), exc_message(exc))

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
            _setrec(_getrec() + 1000)
            tp = _type(exc)
            if _issubclass(tp, _MemoryError):
                ballast.clear()
                end("memory", exc_type="MemoryError")
                finish(0)
            if _issubclass(tp, _RecursionError):
                msg = "maximum recursion depth exceeded"
                end("exception", "RecursionError(%r)" % msg, "RecursionError", msg)
                finish(0)
            end("exception", None, "TracerError",
                "internal tracer error: %s: %s" % (qualname(tp), exc_message(exc)))
            finish(_EXIT_TRACER_BUG)
        except _MemoryError:
            _exit(_EXIT_NOMEM)
        except _BaseException:
            _exit(_EXIT_TRACER_BUG)

    def at_fork_child():
        """os.register_at_fork hook: a process forked by user code is never traced and cannot
        write to the events channel."""
        nonlocal dead, active
        dead = True
        buf.clear()
        if active:                # an untraced run never calls settrace, not even here
            active = False
            _settrace(None)
        try:
            _close(_EVENTS_FD)
        except _OSError:
            pass

    # ---------------------------------------------------------------- signals

    def in_tracer(frame):
        """Whether frame, or any frame below it, is the tracer's (the signal interrupted it)."""
        f = frame
        while f is not None:
            if _id(f.f_code) in cap_ids:
                return True
            f = f.f_back
        return busy or guard

    def signal_signal(signalnum, handler):
        """signal.signal as traced code sees it: Python handlers run through dispatch."""
        prev = user_handlers.get(signalnum)
        if prev is None:
            prev = _getsignal(signalnum)
            if prev is op_dispatch:
                prev = None
        if _callable(handler) and handler is not _SIG_DFL:
            _signal(signalnum, op_dispatch)
            user_handlers[signalnum] = handler
        else:
            _signal(signalnum, handler)
            user_handlers.pop(signalnum, None)
        return prev

    def signal_getsignal(signalnum):
        h = user_handlers.get(signalnum)
        if h is not None:
            return h
        h = _getsignal(signalnum)
        return None if h is op_dispatch else h


    # ---------------------------------------------------------------- value rendering

    def on_alarm(signum, frame):
        # Only interrupts a guarded repr; a late tick (after the repr returned) is ignored.
        if guard:
            raise _ReprTimeout_()

    def guarded(method, obj, what):
        """Call method(obj) (a user __repr__/__str__) under an ITIMER_REAL alarm.

        Returns the str result or a placeholder.  The alarm re-fires every 20 ms so a repr that
        swallows one _ReprTimeout still gets interrupted.  The user's own SIGALRM handler and
        pending ITIMER_REAL are restored afterwards.
        """
        nonlocal guard
        name = qualname(_type(obj))
        if slow.get(_id(obj)) is obj:
            return "<%s object (%s timed out)>" % (name, what)
        prev_handler = _getsignal(_SIGALRM)
        if prev_handler is not op_alarm:
            _signal(_SIGALRM, op_alarm)
        result = failure = None
        prev_timer = (0.0, 0.0)
        started = _monotonic()
        try:
            try:
                guard = True
                prev_timer = _setitimer(_ITIMER, repr_s, 0.02)
                result = method(obj)
                guard = False
            finally:
                guard = False
                _setitimer(_ITIMER, 0)
        except _ReprTimeout_:
            if result is None:      # the alarm may fire right after the repr returned
                failure = "<%s object (%s timed out)>" % (name, what)
                slow[_id(obj)] = obj
        except _BaseException as e:
            failure = "<%s object (%s raised %s)>" % (name, what, qualname(_type(e)))
        guard = False
        try:
            _setitimer(_ITIMER, 0)    # the finally above may have been cut short by the alarm
            if prev_handler is not op_alarm:
                _signal(_SIGALRM, prev_handler if prev_handler is not None else _SIG_DFL)
            if prev_timer[0] > 0:
                left = prev_timer[0] - (_monotonic() - started)
                _setitimer(_ITIMER, _max(left, 1e-6), prev_timer[1])
        except _Exception:
            pass
        if active and _gettrace() is not op_global:
            _settrace(op_global)      # a user repr removed or replaced the trace function
        if failure is not None:
            return failure
        if _type(result) is not _str:
            if not _issubclass(_type(result), _str):
                return "<%s object (%s returned %s)>" % (name, what, qualname(_type(result)))
            result = _str.__str__(result)
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
            out = _ADDR_SUB(address, r[:size])
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
        except _ValueError:          # beyond sys.get_int_max_str_digits()
            return "<int with %d bits>" % bits

    def flat_snapshot(v, tp):
        """(v, len, elements[, keys]) if v is a flat list/tuple/dict of FLAT scalars, else None."""
        try:
            if tp is _list or tp is _tuple:
                if _set(_map(_type, v)) <= FLAT:
                    return (v, _len(v), _tuple(v))
            elif tp is _dict:
                if _set(_map(_type, v)) <= FLAT and _set(_map(_type, v.values())) <= FLAT:
                    return (v, _len(v), _tuple(v.values()), _tuple(v))
        except _Exception:
            pass
        return None

    def render(v):
        """The rendering of v: repr-identical for builtins, at most vc chars plus '...'."""
        tp = _type(v)
        if tp is _str:
            r = _repr(v) if _len(v) <= vc else _repr(v[:vc])
        elif tp is _int:
            r = _repr(v) if -BIG < v < BIG else int_repr(v)
        elif tp in SCALARS:
            r = _repr(v)
        elif tp is _bytes or tp is _bytearray:
            r = _repr(v) if _len(v) <= vc else _repr(v[:vc])
        elif tp in CONTAINERS:
            r = fast_repr(v, tp)
            if r is None:
                out = []
                try:
                    room = into(v, out, vc, _set(), 0)
                except _Exception as e:  # e.g. an element's repr mutated the container
                    return "<%s object (repr raised %s)>" % (qualname(tp), qualname(_type(e)))
                r = _join(out)
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
            if tp is _dict:
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
        except _Exception:   # e.g. a dict mutated under us; fall back to element-wise
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
        if depth >= NEST_LIMIT_:
            return -1                 # nesting too deep to render safely: stop, mark as cut
        opener, closer = BRACKETS[tp]
        if tp is _tuple and _len(x) == 1:
            closer = ",)"
        out.append(opener)
        room -= _len(opener)
        open_ids.add(_id(x))
        first = True
        items = x.items() if tp is _dict else x
        try:
            for e in items:
                if room < 0:
                    return room
                if first:
                    first = False
                else:
                    out.append(", ")
                    room -= 2
                if tp is _dict:
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

    NEST_LIMIT_ = NEST_LIMIT
    BRACKETS = {list: ("[", "]"), tuple: ("(", ")"), dict: ("{", "}"), set: ("{", "}"),
                frozenset: ("frozenset({", "})")}
    RECURSIVE = {list: "[...]", tuple: "(...)", dict: "{...}", set: "set(...)",
                 frozenset: "frozenset(...)"}

    def exc_message(exc):
        """str(exc) (guarded, capped) for the end record."""
        m = guarded(_type(exc).__str__, exc, "str")
        return m if _len(m) <= vc else m[:vc] + "..."

    # ---------------------------------------------------------------- frames and events

    def read_lines(fn):
        """The lines of a traced file other than the item's own (test runs), read once.  Go
        checks every event's source text against the real file, so this never trusts
        linecache (which traced code can rewrite)."""
        lines = file_lines.get(fn)
        if lines is None:
            lines = []
            try:
                with _open(fn, "rb") as fh:
                    data = fh.read()
                enc, _ = _detect_encoding(_BytesIO(data).readline)
                lines = _NL_SPLIT(data.decode(enc))
            except _Exception:
                pass
            file_lines[fn] = lines
        return lines

    def getsrc_for(fn):
        lines = own_lines if fn == filename else read_lines(fn)

        def getsrc(lineno):
            return lines[lineno - 1] if 0 < lineno <= _len(lines) else ""
        return getsrc

    def code_info(code, getsrc):
        info = _CodeInfo_()
        info.getsrc = getsrc
        name = _getattr(code, "co_qualname", code.co_name)
        info.head = ',"func":' + _enc_(name) + ',"file":' + _enc_(code.co_filename) + ","
        info.first = code.co_firstlineno
        info.lines = {}
        # A decorated function's co_firstlineno is its first decorator; the call event must
        # point at the `def` line instead (decorators may span several lines).
        info.def_line = info.first
        if getsrc(info.first).lstrip().startswith("@"):
            for ln in _range(info.first + 1, info.first + 200):
                if _DEF_MATCH(getsrc(ln).lstrip()):
                    info.def_line = ln
                    break
        return info

    def line_pair(info, lineno):
        """('"lineno":N,"depth":', ',"src":"..."') for a line, cached."""
        p = ('"lineno":%d,"depth":' % lineno, ',"src":' + _enc_(info.getsrc(lineno)))
        info.lines[lineno] = p
        return p

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
            if _type(k) is not _str:
                continue
            j = keyj.get(k)
            if j is None:
                j = keyj[k] = ("" if k[:1] == "." or (k[:2] == "__" and k[-2:] == "__")
                               else _enc_(k) + ":")
            if j:
                names.append(k)
        return names

    def new_frame(info, frame):
        nonlocal ordinal
        ordinal += 1
        st = _FrameState_()
        st.ordinal = ordinal
        st.head = '"frame":%d' % ordinal + info.head
        st.info = info
        st.lines = info.lines
        st.keys = st.names = None
        st.vals = {}
        st.objs = {}
        st.snaps = {}
        st.exc = False
        st.lineno = info.first
        st.fid = _id(frame)
        st.op = _opaque(entry, 2)
        states[_id(st.op)] = st
        return st

    def rename(st, keys):
        """Recompute the filtered names after the f_locals keys changed."""
        st.keys = keys
        names = kept_names(keys)
        if _len(names) > _MAX_NAMES:
            limit_reached()
        if names == st.names:
            return ""
        vals, objs = st.vals, st.objs
        if st.names:
            for k in _set(st.names).difference(names):
                del vals[k], objs[k]      # re-emit a name that disappears and comes back
                st.snaps.pop(k, None)
        for k in names:
            if k not in vals:
                vals[k] = None
                objs[k] = MISSING
        st.names = names
        return ',"names":[' + ",".join(_map(_enc_, names)) + "]"

    def entry(frame, event, arg):
        """A traced frame's f_trace (behind its opaque wrapper): checks that the interpreter,
        not traced code, is calling, then records the event."""
        nonlocal busy
        if finished:
            return None
        if busy or not active or _get_ident() != main_ident:
            tampering("traced code called the tracer's trace function")
        st = states.get(_id(frame.f_trace))
        if st is None or st.fid != _id(frame):
            tampering("a frame's trace function was moved to another frame")
        busy = True
        try:
            if naive:
                naive_trace(st, frame, event, arg)
            else:
                trace(st, frame, event, arg)
        finally:
            busy = False
        return st.op

    def trace(st, frame, event, arg):
        """The hot path: one event of a traced frame, locals diffed against the last one.

        Kept in one function (no helper calls for the common case): per-event overhead is
        what bounds the tracer's throughput.
        """
        nonlocal n_events, n_bytes, flush_at
        try:
            lineno = frame.f_lineno
            if lineno is None:        # 3.12+: artificial instructions have no line
                lineno = st.lineno
            elif event == "call" and lineno == st.info.first:
                lineno = st.info.def_line       # decorated: point at the def line
            st.lineno = lineno
            lc = st.lines.get(lineno) or line_pair(st.info, lineno)
            loc = frame.f_locals
            if _type(loc) is not _dict:
                loc = as_dict(loc)
            keys = _tuple(loc)
            names_part = "" if keys == st.keys else rename(st, keys)
            vals, objs, snaps = st.vals, st.objs, st.snaps
            changed = []
            for name in st.names:
                v = loc[name]
                if v is objs[name]:
                    continue          # same immutable object as last time: unchanged
                tp = _type(v)
                if tp is _int and -BIG < v < BIG:
                    j = '"' + _repr(v) + '"'
                elif tp is _str and _len(v) <= vc:
                    r = _repr(v)
                    j = _enc_(r if _len(r) <= vc else r[:vc] + "...")
                else:
                    # A flat list/tuple/dict whose elements are still the same objects
                    # renders as before: skip the repr (identity checks run in C).
                    snap = snaps.get(name)
                    if (snap is not None and snap[0] is v and _len(v) == snap[1]
                            and _all(_map(_is, snap[2], v if tp is not _dict else v.values()))
                            and (tp is not _dict or _all(_map(_is, snap[3], v)))):
                        continue
                    j = _enc_(render(v))
                    snaps[name] = flat_snapshot(v, tp)
                objs[name] = v if tp in IMMUTABLE else MISSING
                if j != vals[name]:
                    vals[name] = j
                    changed.append(keyj[name] + j)
            if event == "line" or event == "call":
                tail = "}}\n"
            elif event == "return":
                tail = ('},"value":' + _enc_(render(arg))
                        + (',"unwind":true}\n' if st.exc and unwinding(frame, arg)
                           else "}\n"))
            elif event == "exception":
                tail = ('},"value":' + _enc_(render(arg[1])) + ',"exc_type":'
                        + _enc_(qualname(arg[0])) + "}\n")
            else:
                return
            st.exc = event == "exception"
            line = (f'{{"event":"{event}",{st.head}{lc[0]}{st.dstr}{lc[1]}{names_part}'
                    f',"locals":{{{",".join(changed)}{tail}')
            # emit(line), inlined
            size = _len(line)
            if n_events >= max_events or n_bytes + size > max_bytes or size > _MAX_LINE:
                limit_reached()
            n_events += 1
            n_bytes += size
            buf.append(line)
            if n_bytes >= flush_at:
                flush_at = n_bytes + _CHUNK
                flush()
        except _BaseException as e:
            try:
                fatal(e)
            except _BaseException:
                pass      # at the very recursion limit even fatal() cannot be called

    def naive_trace(st, frame, event, arg):
        """Benchmark baseline: plain repr of every local and json.dumps of every event."""
        try:
            lineno = frame.f_lineno
            if event == "call" and lineno == st.info.first:
                lineno = st.info.def_line
            elif lineno is None:
                lineno = st.lineno
            st.lineno = lineno
            code = frame.f_code
            ev = {"event": event, "frame": st.ordinal,
                  "func": _getattr(code, "co_qualname", code.co_name),
                  "file": code.co_filename, "lineno": lineno, "depth": st.depth,
                  "src": st.info.getsrc(lineno)}
            loc = frame.f_locals
            if _type(loc) is not _dict:
                loc = as_dict(loc)
            names = kept_names(loc)
            if _len(names) > _MAX_NAMES:
                limit_reached()
            ev["names"] = names
            ev["locals"] = {k: plain(loc[k]) for k in names}
            if event == "return":
                ev["value"] = plain(arg)
                if st.exc and unwinding(frame, arg):
                    ev["unwind"] = True
            elif event == "exception":
                ev["value"] = plain(arg[1])
                ev["exc_type"] = qualname(arg[0])
            elif event != "line" and event != "call":
                return
            st.exc = event == "exception"
            emit(_dumps(ev, separators=(",", ":")) + "\n")
        except _BaseException as e:
            try:
                fatal(e)
            except _BaseException:
                pass      # at the very recursion limit even fatal() cannot be called

    def unwinding(frame, arg):
        """A return right after an exception event: is the frame left by that exception?"""
        if arg is not None:
            return False
        try:
            return frame.f_code.co_code[frame.f_lasti] not in _NORMAL_EXITS_
        except _Exception:
            return True

    def plain(v):
        try:
            r = _repr(v)
        except _Exception as e:
            r = "<%s object (repr raised %s)>" % (qualname(_type(v)), qualname(_type(e)))
        return r if _len(r) <= vc else r[:vc] + "..."

    def global_trace(frame, event, arg):
        """sys.settrace hook: called for every new (or resumed) frame with event 'call'."""
        nonlocal busy
        if finished:
            return None
        if busy or not active or _get_ident() != main_ident:
            tampering("traced code called the tracer's trace function")
        busy = True
        try:
            code = frame.f_code
            cid = _id(code)
            if cid in cap_ids:
                # One of the trace functions themselves, called as a function while tracing
                # is on: traced code called it (the interpreter never traces its own trace
                # callbacks).
                if cid in entry_ids:
                    tampering("traced code called the tracer's trace function")
                return None
            fn = code.co_filename
            t = file_is_target.get(fn)
            if t is None:
                t = file_is_target[fn] = ((fn in exact_targets or (
                    _bool(prefix_targets) and fn.startswith(prefix_targets)
                    and "/../" not in fn and "/./" not in fn))
                    and not (exclude and fn.startswith(exclude)))
            if not t or cid in trusted_ids:
                return None
            st = states.get(_id(frame.f_trace))  # a generator/coroutine resuming: same ordinal
            if st is not None and st.fid != _id(frame):
                tampering("a frame's trace function was moved to another frame")
            if st is None:
                info = infos.get(cid)
                if info is None:
                    info = infos[cid] = code_info(code, getsrc_for(fn))
                    pinned.append(code)
                    if want_functions:
                        function_record(code)
                st = new_frame(info, frame)
            # depth = traced frames below this one: the nearest traced caller's depth + 1.
            # sdepth = Python frames on the stack up to this one (for the recursion check).
            depth = 0
            sdepth = 1
            f = frame.f_back
            while f is not None:
                below = states.get(_id(f.f_trace))
                if below is not None and f.f_trace is below.op:
                    depth = below.depth + 1
                    sdepth += below.sdepth
                    break
                sdepth += 1
                f = f.f_back
            if depth == 0 and entry_code is not None and (
                    frame.f_back is None or frame.f_back.f_code is not entry_code):
                # Function items: every frame at depth 0 is called from the item's call
                # expression itself; anything else means the bottom of the stack was rebound.
                tampering("the traced call is not the item's call expression")
            st.sdepth = sdepth
            st.depth = depth
            st.dstr = _str(depth)
            if sdepth > _getrec() - _RECURSION_MARGIN:
                # Leave the tracer room to report: past this point a RecursionError could
                # hit the trace function itself, and CPython would silently drop tracing.
                raise _RecursionError("maximum recursion depth exceeded")
            if naive:
                naive_trace(st, frame, event, arg)
            else:
                trace(st, frame, event, arg)
            return st.op
        except _BaseException as e:
            try:
                fatal(e)
            except _BaseException:
                pass
        finally:
            busy = False

    entry_code = None           # set by start_call: the item's compiled call expression

    def start_call(call_code):
        """Function items: trace from here on; depth-0 frames must be called by call_code."""
        nonlocal active, entry_code
        if not _trusted():
            tampering("traced code called the tracer")
        entry_code = call_code
        _signal(_SIGALRM, op_alarm)
        active = True
        _settrace(op_global)

    def resume():
        """Test runs: trace from here on (one phase of a test).  Unlike start_call, it leaves
        the SIGALRM handler alone (a test's own alarm must keep working between phases;
        guarded installs and restores its handler per repr), and a forked grandchild never
        traces.  Resuming while tracing is on means traced code called a phase hook itself."""
        nonlocal active
        if not _trusted() or active:
            tampering("traced code called the tracer")
        if dead:
            return
        active = True
        _settrace(op_global)

    def stop():
        nonlocal active, lost
        if not _trusted():
            tampering("traced code called the tracer")
        if active and _gettrace() is not op_global:
            # CPython switched tracing off itself: calling the trace function raised (the
            # recursion limit reached in untraced code) and the program caught the error.
            lost = True
        active = False
        _settrace(None)

    def checked(fn, once=None):
        """An opaque entry point for the item's bottom code: fn runs only when called by the
        tracer's own code.  The entry points that write to the events channel are one-shot per
        group (`once`): the bottom code of this file is reachable from traced code, and running
        it again (or a function made from its code) would write a second record, which is
        tampering."""
        def call(*args, **kwargs):
            if not _trusted():
                tampering("traced code called the tracer")
            if once is not None:
                if once in used:
                    tampering("the tracer's bottom code ran twice")
                used.add(once)
            return fn(*args, **kwargs)
        return _opaque(call)

    used = set()                # the one-shot groups already spent

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
                return
            key_ = (fn, hit[1], hit[2])
            if key_ in blocks_seen:
                return
            blocks_seen.add(key_)
            text = _join(lines[hit[1] - 1:hit[2]])
            if text.endswith("\r\n"):
                text = text[:-2]
            elif text.endswith(("\n", "\r")):
                text = text[:-1]
        except _Exception:
            return
        record('{"event":"function","file":%s,"qualname":%s,"first":%d,"last":%d,"source":%s}\n'
               % (_enc_(fn), _enc_(hit[0]), hit[1], hit[2], _enc_(text)))

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
        except _Exception:
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

    # The opaque callables traced code may come across, and the code sets the checks use.
    op_global = _opaque(global_trace, 1)
    op_alarm = _opaque(on_alarm)
    op_dispatch = _opaque(_signal_dispatcher(_opaque(in_tracer), user_handlers, _defer_signal, _SIG_DFL))
    trusted_codes = _tracer_codes()
    cap_codes = _code_objects([make_tracer.__code__])
    cap_ids = frozenset(_id(c) for c in cap_codes)
    trusted_ids = frozenset(_id(c) for c in trusted_codes)
    entry_ids = frozenset(_id(c) for c in (entry.__code__, global_trace.__code__))

    # From here on nothing of the above is handed out but opaque callables: the at-fork hook
    # and the tamper handler are registered where Python cannot list them.
    os.register_at_fork(after_in_child=at_fork_child)
    native.install_audit(trusted_codes, cap_codes, _import_codes(), on_tamper,
                         DENIED_IMPORTS, TAMPER_IMPORTS, tuple(req["pyc_roots"]))
    return types.SimpleNamespace(
        start_call=checked(start_call, "start"), stop=checked(stop), resume=checked(resume),
        end=checked(end, "end"), end_exception=checked(end_exception, "end"),
        finish=checked(finish), render=checked(render), exc_message=checked(exc_message),
        emit=checked(emit, "blocks"), record=checked(record, "record"),
        release_ballast=checked(ballast.clear),
        signal_signal=_opaque(signal_signal), signal_getsignal=_opaque(signal_getsignal))


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


def _write_file(path, data):
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, data.encode("ascii"))
    finally:
        os.close(fd)


def _map_ids(inside, outside_uid, outside_gid):
    """Map one uid/gid of a user namespace this process just created (no privilege needed)."""
    _write_file("/proc/self/uid_map", "%d %d 1\n" % (inside, outside_uid))
    _write_file("/proc/self/setgroups", "deny")
    _write_file("/proc/self/gid_map", "%d %d 1\n" % (inside, outside_gid))


def _report_setup_failure(fds, what, exc):
    """Best effort: the reason an item could not be set up, on its stderr pipe."""
    try:
        os.write(fds[2], ("ndtrace: %s failed: %r\n" % (what, exc)).encode("utf-8", "replace"))
    except BaseException:
        pass


def _mirror_exit(status):
    """End this process the way the process with wait status `status` ended."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            signal.signal(sig, signal.SIG_DFL)
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
            os.kill(os.getpid(), sig)
        except BaseException:
            pass
        os._exit(128 + sig)
    os._exit(os.WEXITSTATUS(status) if os.WIFEXITED(status) else EXIT_SETUP)


def _keeper(sock, hdr, fds, opts):
    """The first process of an item (forked by the zygote): it leaves the zygote's identity and
    creates the item's own user, mount, PID and IPC namespaces, then waits for the item's init
    and ends the way the item did, so the zygote sees the item's exit status and resources.
    Never returns."""
    try:
        sock.close()                 # the control socket is the zygote's alone
        os.setsid()                  # own process group: the zygote kills it as a whole
        if opts.cgroup_fd is not None:
            # cgroup v2: the item group's cgroup.procs, opened by Go; "0" moves this process.
            os.write(opts.cgroup_fd, b"0")
        if opts.drop_uid is not None:
            os.setgroups([])
            os.setresgid(opts.drop_gid, opts.drop_gid, opts.drop_gid)
            os.setresuid(opts.drop_uid, opts.drop_uid, opts.drop_uid)
        _N.set_dumpable(1)           # our /proc/self/*_map stay ours to write
        uid, gid = os.geteuid(), os.getegid()
        _N.unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC)
        _map_ids(0, uid, gid)
        _N.set_dumpable(0)
        r, w = os.pipe2(os.O_CLOEXEC)
        pid = os.fork()
        if pid == 0:
            try:
                os.close(r)
                _item_init(hdr, fds, opts, w)
            finally:
                os._exit(EXIT_SETUP)
        os.close(w)
        _close_all(fds)
        _, status = os.waitpid(pid, 0)
        data = os.read(r, 32)
    except BaseException as e:
        _report_setup_failure(fds, "item namespaces", e)
        os._exit(EXIT_SETUP)
    try:
        _mirror_exit(int(data) if data.strip().lstrip(b"-").isdigit() else status)
    finally:
        os._exit(EXIT_SETUP)


def _item_init(hdr, fds, opts, status_w):
    """PID 1 of the item's PID namespace and root of its user namespace: mounts the item's own
    /proc, /tmp and /dev/shm (fresh per item, gone with it), bounds its System V IPC objects,
    then forks the item, reaps everything the item leaves, and reports the item's wait status
    to the keeper.  When it exits the kernel kills whatever is left in the namespace.  Never
    returns."""
    try:
        _N.mount(None, "/", None, MS_REC | MS_PRIVATE, None)
        flags = MS_NOSUID | MS_NODEV | MS_NOEXEC
        try:
            _N.mount("proc", "/proc", "proc", flags, None)
            have_proc = True
        except OSError:
            # A container runtime that masks parts of /proc forbids a fresh one in a user
            # namespace (docs/sandbox.md): the item then gets none.
            have_proc = False
        # Limits of this item's IPC namespace (sysctls apply to the writer's namespaces, through
        # whichever /proc is there): segments go away once detached, and at most shm_bytes of
        # SysV shared memory and a few small message queues exist at a time.  Where they cannot
        # be set, the item may not create System V IPC objects at all (its seccomp filter).
        shm = max(4096, opts.shm_bytes)
        try:
            if "ro-sysctl" in opts.simulate:
                raise PermissionError("simulated: sysctls that cannot be written")
            for name, value in (("kernel/shm_rmid_forced", "1"), ("kernel/shmmax", str(shm)),
                                ("kernel/shmall", str(shm // 4096)), ("kernel/shmmni", "64"),
                                ("kernel/msgmni", "16"), ("kernel/msgmnb", "65536"),
                                ("kernel/msgmax", "8192")):
                _write_file("/proc/sys/" + name, value)
            opts.ipc_limited = True
        except OSError:
            opts.ipc_limited = False
        for name, value in (("user/max_user_namespaces", "1"), ("vm/memfd_noexec", "2")):
            try:
                _write_file("/proc/sys/" + name, value)   # seccomp refuses both anyway
            except OSError:
                pass
        _N.mount("tmpfs", "/tmp", "tmpfs", flags, "size=%d,mode=1777" % opts.tmp_bytes)
        _N.mount("tmpfs", "/dev/shm", "tmpfs", flags, "size=%d,mode=1777" % shm)
        if have_proc:
            _N.mount("/proc/sys", "/proc/sys", None, MS_BIND | MS_REC, None)
            _N.mount(None, "/proc/sys", None, MS_BIND | MS_REMOUNT | MS_RDONLY | flags, None)
        to_item, from_init = os.pipe2(os.O_CLOEXEC)
        to_init, from_item = os.pipe2(os.O_CLOEXEC)
    except BaseException as e:
        _report_setup_failure(fds, "item mounts", e)
        os._exit(EXIT_SETUP)
    pid = os.fork()
    if pid == 0:
        try:
            os.close(status_w)
            os.close(from_init)
            os.close(to_init)
            opts.sync = (to_item, from_item)
            _item(hdr, fds, opts)
        finally:
            os._exit(EXIT_SETUP)
    _close_all(fds)
    os.close(to_item)
    os.close(from_item)
    try:
        # The item has created its own user namespace: map its uid, as root of the parent one
        # (the item needs no /proc for it), then hide /proc where the item may not have it.
        if os.read(to_init, 1) == b"u":
            _write_file("/proc/%d/uid_map" % pid, "%d 0 1\n" % CODE_UID)
            _write_file("/proc/%d/setgroups" % pid, "deny")
            _write_file("/proc/%d/gid_map" % pid, "%d 0 1\n" % CODE_UID)
            if not (have_proc and opts.landlock):
                # Without Landlock nothing would keep the item from its own /proc/self/mem (the
                # tracer's memory); without a /proc of its own, the sandbox's would show the
                # zygote.  Either way it gets no /proc at all.
                _N.mount("tmpfs", "/proc", "tmpfs", flags | MS_RDONLY, "size=4096,mode=0555")
            os.write(from_init, b"g")
    except BaseException as e:
        _report_setup_failure(fds, "item user namespace", e)
        os.kill(pid, signal.SIGKILL)
    os.close(to_init)
    os.close(from_init)
    status = (EXIT_SETUP << 8)
    while True:
        try:
            p, st = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if p == pid:
            status = st
            break
    try:
        os.write(status_w, b"%d" % status)
    finally:
        os._exit(0)


def _landlock_rules(opts):
    """What the item may touch: the read-only mounts (read, execute), its /tmp and /dev/shm,
    the harmless devices, directory listings anywhere, and a few global /proc files; no /proc
    file of any process (its own memory is the tracer's)."""
    n = _N
    ro = n.LL_EXECUTE | n.LL_READ_FILE | n.LL_READ_DIR
    rw = (n.LL_READ_FILE | n.LL_WRITE_FILE | n.LL_READ_DIR | n.LL_REMOVE_DIR | n.LL_REMOVE_FILE
          | n.LL_MAKE_DIR | n.LL_MAKE_REG | n.LL_MAKE_SOCK | n.LL_MAKE_FIFO | n.LL_MAKE_SYM
          | n.LL_REFER | n.LL_TRUNCATE)
    dev = n.LL_READ_FILE | n.LL_WRITE_FILE | n.LL_TRUNCATE | n.LL_IOCTL_DEV
    rules = [("/", n.LL_READ_DIR), ("/tmp", rw), ("/dev/shm", rw)]
    rules += [(p, ro) for p in opts.ro]
    rules += [("/dev/" + d, dev) for d in ("null", "zero", "full", "random", "urandom")]
    rules += [("/proc/" + f, n.LL_READ_FILE) for f in
              ("cpuinfo", "meminfo", "stat", "uptime", "loadavg", "version", "filesystems")]
    return rules


def _item(hdr, fds, opts):
    """The item process (PID 2 of its namespace).  It gives up everything before any of its
    request is even read: rlimits, a user namespace of its own that owns nothing (so the
    read-only mounts stay locked), no capabilities in any set, no_new_privs, Landlock and the
    seccomp filter.  Then it reads its request and runs it.  Never returns."""
    try:
        os.setsid()
        # Move everything out of the way first so the dup2s below cannot clobber each other.
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 100) for fd in fds + list(opts.sync)]
        null = os.open("/dev/null", os.O_RDWR | os.O_CLOEXEC)
        high.append(fcntl.fcntl(null, fcntl.F_DUPFD_CLOEXEC, 100))
        os.dup2(high[1], EVENTS_FD, inheritable=False)   # user-exec'd programs don't inherit it
        os.dup2(high[2], 1)
        os.dup2(high[3], 2)
        os.dup2(high[6], 0)
        os.dup2(high[0], REQUEST_FD, inheritable=False)
        os.dup2(high[4], SYNC_FDS[0], inheritable=False)
        os.dup2(high[5], SYNC_FDS[1], inheritable=False)
        nofile_hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        if nofile_hard == resource.RLIM_INFINITY or nofile_hard > (1 << 20):
            nofile_hard = 1 << 20
        os.closerange(SYNC_FDS[1] + 1, max(nofile_hard, 4096))

        lim = hdr["limits"]
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
            _set_limit(resource.RLIMIT_NOFILE, max(lim["nofile"], SYNC_FDS[1] + 1))

        # A user namespace of the item's own (its parent, the item init's, owns the mounts, PID
        # and IPC namespaces): it is uid CODE_UID there (the init writes the map) and keeps no
        # capability anywhere.
        to_item, from_item = SYNC_FDS
        _N.set_dumpable(1)            # the init writes our /proc/PID/*_map
        _N.unshare(CLONE_NEWUSER)
        os.write(from_item, b"u")
        if os.read(to_item, 1) != b"g":
            raise OSError("the item's init did not map its user namespace")
        os.close(to_item)
        os.close(from_item)
        _N.set_dumpable(0)
        _N.drop_capabilities()
        if opts.landlock:
            _N.landlock(_landlock_rules(opts))
        _N.seccomp(opts.seccomp if opts.ipc_limited else opts.seccomp_nosysv)
        signal.signal(signal.SIGINT, signal.default_int_handler)   # ordinary Python behaviour
    except BaseException as e:
        _report_setup_failure((0, 1, 2), "item isolation", e)
        os._exit(EXIT_SETUP)
    req, tracer = _prepare(hdr, opts)
    try:
        if req["kind"] == "call":
            _run_call(req, tracer)
        else:
            _run_tests(req, tracer)
    finally:
        os._exit(EXIT_TRACER_BUG)


def _prepare(hdr, opts):
    """Read the item's request from its own pipe (the zygote never sees it), build the tracer
    with the request's key, and hide the sandbox's machinery from the code about to run.  No
    frame that outlives this function holds the key."""
    try:
        chunks = []
        size = 0
        while True:
            b = os.read(REQUEST_FD, 1 << 20)
            if not b:
                break
            size += len(b)
            if size > MAX_MESSAGE:
                raise ProtocolError("request too large")
            chunks.append(b)
        os.close(REQUEST_FD)
        body = json.loads(b"".join(chunks))
        del chunks
        key = bytes.fromhex(body.pop("key"))
        if len(key) < 16:
            raise ProtocolError("request: key too short")
        req = validate_body(hdr, body)
        req["pyc_roots"] = tuple(p.rstrip("/") + "/" for p in opts.ro)
        sys.argv = [req["filename"] or req["runner"] or "python"]
        random.seed(req["seed"])
        if req["kind"] == "call":
            os.chdir("/tmp")
            if req["pythonpath"]:
                _extend_path(None, req["pythonpath"])
        tracer = make_tracer(req, key, _N)
        del key, body
    except BaseException as e:
        _report_setup_failure((0, 1, 2), "item request", e)
        os._exit(EXIT_SETUP)
    # Python handlers of signals traced code installs go through the tracer (never handed a
    # frame of the tracer); the C module behind signal is no longer importable.
    for mod in (signal, sys.modules.get("_signal")):
        if mod is not None:
            mod.signal = tracer.signal_signal
            mod.getsignal = tracer.signal_getsignal
    tracer.signal_signal(signal.SIGINT, signal.default_int_handler)
    sys.modules.pop("_signal", None)
    _N.seal()
    return req, tracer


def _run_call(req, tracer):
    """Body of a function-level item: compile, run the module body untraced, trace the call."""
    # Everything used after traced code has run is bound here first: the module body may rebind
    # builtins, this file's globals or attributes of shared modules.
    start_call, stop, end, end_exception = tracer.start_call, tracer.stop, tracer.end, tracer.end_exception
    finish, render, emit, release_ballast = tracer.finish, tracer.render, tracer.emit, tracer.release_ballast
    _eval, _exec, _BaseException, _MemoryError = eval, exec, BaseException, MemoryError
    _setrec, _getrec, _exit = sys.setrecursionlimit, sys.getrecursionlimit, os._exit
    _SLACK, _EXIT_NOMEM, _EXIT_TRACER_BUG = RECURSION_SLACK, EXIT_NOMEM, EXIT_TRACER_BUG
    try:
        try:
            tree = ast.parse(req["code"], req["filename"])
            code = compile(tree, req["filename"], "exec", dont_inherit=True)
            call = compile(req["call"], "<call>", "eval", dont_inherit=True)
        except MemoryError:
            release_ballast()
            end("memory", exc_type="MemoryError")
            finish(0)
        except Exception as e:
            msg = str(e)
            vc = max(1, req["limits"]["value_chars"])
            end("invalid", exc_type=_qualname(type(e)),
                exc_message=msg if len(msg) <= vc else msg[:vc] + "...")
            finish(0)

        # The file's top-level statements (decorators included): the debugger's CODE context is
        # made of the blocks that contain visited lines.
        blocks = [[min([n.lineno] + [d.lineno for d in getattr(n, "decorator_list", ())]),
                   n.end_lineno] for n in tree.body]
        emit('{"event":"blocks","file":%s,"blocks":%s}\n'
             % (json.dumps(req["filename"]), json.dumps(blocks, separators=(",", ":"))))
        lines = [line + "\n" for line in _NEWLINE_RE.split(req["code"])]
        linecache.cache[req["filename"]] = (len(req["code"]), None, lines, req["filename"])

        # A fresh __main__ module: user classes pickle and dataclasses resolve against the
        # user's namespace, and `import __main__` does not reach the tracer's globals.
        module = types.ModuleType("__main__")
        namespace = module.__dict__
        namespace["__builtins__"] = builtins
        sys.modules["__main__"] = module
        del tree, blocks, lines, module
        try:
            _exec(code, namespace)   # the module body runs untraced
        except _BaseException as e:
            end_exception(e)
            finish(0)

        _setrec(_getrec() + _SLACK)
        start_call(call)
        try:
            result = _eval(call, namespace)
        except _BaseException as e:
            stop()
            end_exception(e)
            finish(0)
        stop()
        end("ok", render(result))
        finish(0)
    except _MemoryError:
        try:
            release_ballast()
            end("memory", exc_type="MemoryError")
            finish(0)
        except _BaseException:
            _exit(_EXIT_NOMEM)
    except _BaseException as e:
        try:
            end("exception", None, "TracerError", "internal tracer error: %r" % (e,))
            finish(_EXIT_TRACER_BUG)
        except _BaseException:
            _exit(_EXIT_TRACER_BUG)
    finally:
        _exit(_EXIT_TRACER_BUG)


# --------------------------------------------------------------------------------------------
# Test runs (kind collect / test): a repository's test suite, one test per item
# --------------------------------------------------------------------------------------------

_MISSING_RE = re.compile(r"No module named '([^']+)'")
# Top-level names of the third-party modules the zygote imported for pytest (None: not tried).
_PRELOADED = {"tops": None}


def _run_tests(req, tracer):
    """Body of a collect or test item: never returns.

    The repository's code runs inside the runner (conftest, test modules, fixtures) and may
    rebind this file's globals and builtins, so what writes the records afterwards is bound
    here first; the records' strings go through the C JSON encoder, so no field can carry
    anything but a string."""
    end, finish, record, stop = tracer.end, tracer.finish, tracer.record, tracer.stop
    end_exception = tracer.end_exception
    enc, _map, join, _BaseException = _enc, map, ",".join, BaseException
    d = req["dir"]
    try:
        os.chdir(d)
    except OSError as e:
        end("invalid", exc_type=_qualname(type(e)),
                   exc_message="cannot enter %s: %s" % (d, e.strerror))
        finish(0)
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
    except _BaseException as e:         # the runner itself crashed: no verdict
        if req["traced"]:
            stop()
        end_exception(e)
        finish(0)

    missing = state.missing or ""
    if req["kind"] == "collect":
        record('{"event":"collection","runner":%s,"tests":[%s],"errors":[%s],'
               '"missing_module":%s}\n'
                % (enc(runner), join(_map(enc, state.tests or [])),
                   join(_map(enc, state.errors)), enc(missing)))
        if state.fatal is not None:
            end("exception", None, state.fatal[0], state.fatal[1])
        else:
            end("ok")
        finish(0)
    outcome = _verdict(state.verdicts)
    when, exc_type, exc_msg = state.failure or ("", "", "")
    if state.fatal is not None and not state.verdicts and state.failure is None:
        when, exc_type, exc_msg = "collect", state.fatal[0], state.fatal[1]
    if outcome not in ("failed", "error"):
        missing = ""
        when = exc_type = exc_msg = ""
    record('{"event":"test","runner":%s,"outcome":%s,"missing_module":%s,"when":%s,'
           '"exc_type":%s,"exc_message":%s}\n'
           % (enc(str(runner)), enc(str(outcome)), enc(str(missing)), enc(str(when)),
              enc(str(exc_type)), enc(str(exc_msg))))
    end("ok")
    finish(0)


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
    data, fds, flags, _ = socket.recv_fds(sock, 4, 4)
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


def _check_limits(given):
    limits = dict(DEFAULT_LIMITS)
    if type(given) is not dict:
        raise ProtocolError("run: limits must be an object")
    for k, v in given.items():
        if k in limits:
            if type(v) is not int:
                raise ProtocolError("run: limit %r must be an integer" % k)
            limits[k] = v
    return limits


def validate_run(msg, fds):
    """Check a run request's header (the zygote's part; the item's code and inputs travel on
    the item's own request pipe) and fill in missing limits; raises ProtocolError."""
    if len(fds) != 4:
        raise ProtocolError("run: expected 4 file descriptors, got %d" % len(fds))
    if type(msg.get("id")) is not int:
        raise ProtocolError("run: 'id' missing or of the wrong type")
    kind = msg.get("kind", "call")
    if kind not in ("call", "collect", "test"):
        raise ProtocolError("run: unknown kind %r" % (kind,))
    if msg.get("runner", "") not in ("", "pytest", "unittest"):
        raise ProtocolError("run: unknown runner %r" % (msg.get("runner"),))
    return {"id": msg["id"], "kind": kind, "runner": msg.get("runner", ""),
            "limits": _check_limits(msg.get("limits", {}))}


def validate_body(hdr, msg):
    """Check an item's request body (read by the item itself) against its header."""
    def need(key, *types_):
        v = msg.get(key)
        if type(v) not in types_:
            raise ProtocolError("run: %r missing or of the wrong type" % key)
        return v
    if type(msg) is not dict:
        raise ProtocolError("run: the request is not an object")
    kind = hdr["kind"]
    if kind == "call":
        need("code", str)
        need("filename", str)
        need("call", str)
    else:
        if type(msg.get("dir")) is not str or not msg["dir"].startswith("/"):
            raise ProtocolError("run: dir must be an absolute path")
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
    return {"id": hdr["id"], "kind": kind, "code": msg.get("code", ""),
            "filename": msg.get("filename", ""), "call": msg.get("call", ""),
            "targets": targets, "seed": msg.get("seed", 0),
            "naive": msg.get("naive", False), "limits": hdr["limits"],
            "dir": msg.get("dir", ""), "runner": hdr["runner"],
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
    """Handle one `run`: fork the item's keeper, supervise, reap, clean up, report.  Returns
    True to exit."""
    try:
        hdr = validate_run(msg, fds)
    except ProtocolError as e:
        _close_all(fds)
        reply = {"op": "error", "message": str(e)}
        if type(msg.get("id")) is int:
            reply["id"] = msg["id"]
        return not send(sock, reply)

    _preload(hdr)
    started = time.monotonic()
    try:
        pid = os.fork()
    except OSError as e:
        _close_all(fds)
        return not send(sock, {"op": "error", "message": "fork failed: %s" % (e,),
                               "id": hdr["id"]})
    if pid == 0:
        try:
            _keeper(sock, hdr, fds, opts)
        finally:
            os._exit(EXIT_SETUP)
    _close_all(fds)                   # only the item holds the pipes now

    reason, exit_zygote = supervise(sock, hdr, pid, started)
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)     # zombie: pgid still reserved
    wall_ms = int((time.monotonic() - started) * 1000)
    try:
        os.killpg(pid, signal.SIGKILL)   # whatever the keeper left in its process group
    except OSError:
        pass
    _, status, usage = os.wait4(pid, 0)
    all_gone = _kill_namespace() if opts.own_pidns else True
    exit_code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
    sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    sent = send(sock, {"op": "done", "id": hdr["id"], "reason": reason, "exit_code": exit_code,
                       "signal": sig, "wall_ms": wall_ms,
                       "cpu_ms": int((usage.ru_utime + usage.ru_stime) * 1000),
                       "max_rss_kb": usage.ru_maxrss, "clean": all_gone})
    return exit_zygote or not sent


def parse_args(argv):
    p = argparse.ArgumentParser(prog="ndtrace-zygote", add_help=False)
    p.add_argument("--ctrl-fd", type=int)
    p.add_argument("--own-pidns", action="store_true")
    p.add_argument("--drop-uid", type=int)
    p.add_argument("--drop-gid", type=int)
    p.add_argument("--support", default="/.ndtrace")
    p.add_argument("--ro", action="append", default=[])
    p.add_argument("--cgroup-fd", type=int)
    p.add_argument("--tmp-bytes", type=int, default=64 << 20)
    p.add_argument("--shm-bytes", type=int, default=16 << 20)
    p.add_argument("--selfcheck", action="store_true")
    p.add_argument("--simulate", action="append", default=[])   # tests: no-landlock, ro-sysctl
    opts = p.parse_args(argv)
    if opts.selfcheck:
        return opts
    if opts.ctrl_fd is None:
        p.error("--ctrl-fd is required")
    if (opts.drop_uid is None) != (opts.drop_gid is None):
        p.error("--drop-uid and --drop-gid go together")
    # Defence in depth: kill(-1) outside a private PID namespace would hit the whole host. In
    # one, the zygote is PID 1 (namespaces backend) or 2 (bubblewrap's init is PID 1).
    if opts.own_pidns and os.getpid() > 2:
        p.error("--own-pidns given, but this process (pid %d) is not at the top of a fresh PID "
                "namespace" % os.getpid())
    return opts


def _load_native(path):
    """Import the native helper from path without making it importable by name."""
    loader = importlib.machinery.ExtensionFileLoader("_ndtrace_native", path)
    spec = importlib.util.spec_from_loader("_ndtrace_native", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def _code_objects(roots):
    """roots and every code object nested in them (functions, lambdas, classes, genexprs)."""
    out, seen, todo = [], set(), list(roots)
    while todo:
        c = todo.pop()
        if id(c) in seen:
            continue
        seen.add(id(c))
        out.append(c)
        todo.extend(k for k in c.co_consts if isinstance(k, types.CodeType))
    return out


def _tracer_codes():
    """Every code object of this file: the module's code (the bottom frame of every process
    started from this file) and everything nested in it.  Recomputed where needed, never kept
    in a global: a list of the tracer's code objects is exactly what traced code must not
    find."""
    f = sys._getframe()
    while f.f_back is not None:
        f = f.f_back
    return _code_objects([f.f_code])


def _import_codes():
    """The code of importlib's and zipimport's functions, and of types.coroutine: the only
    legitimate callers of marshal.loads (bytecode from .pyc files) and of code.replace (a flag)."""
    roots = [types.coroutine.__code__]
    for name in ("importlib._bootstrap", "importlib._bootstrap_external", "zipimport"):
        mod = sys.modules.get(name)
        for v in vars(mod).values() if mod is not None else ():
            members = vars(v).values() if isinstance(v, type) else (v,)
            for m in members:
                for f in (m, getattr(m, "__func__", None), getattr(m, "fget", None)):
                    c = getattr(f, "__code__", None)
                    if isinstance(c, types.CodeType):
                        roots.append(c)
    return _code_objects(roots)


def selfcheck():
    """Print every global or builtin look-up made by the tracer's run-time code (the functions
    nested in make_tracer): traced code can rebind those names, so there must be none."""
    import dis
    bad = []
    for code in _code_objects([make_tracer.__code__]):
        if code is make_tracer.__code__:
            continue                  # runs once, before any traced code
        for ins in dis.get_instructions(code):
            if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME", "STORE_GLOBAL", "DELETE_GLOBAL",
                              "STORE_NAME", "IMPORT_NAME", "LOAD_FROM_DICT_OR_GLOBALS"):
                bad.append("%s line %s: %s %s" % (getattr(code, "co_qualname", code.co_name),
                                                  ins.positions.lineno if ins.positions else "?",
                                                  ins.opname, ins.argval))
    for b in bad:
        print(b)
    return 1 if bad else 0


def main(argv):
    global _N
    opts = parse_args(argv)
    if opts.selfcheck:
        return selfcheck()
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sock = socket.socket(fileno=opts.ctrl_fd)
    sock.settimeout(None)
    try:
        _N = _load_native(os.path.join(opts.support, "_ndtrace_native.so"))
        sys.modules.pop("_ndtrace_native", None)   # the loader caches it: traced code may not
        _N.set_dumpable(0)            # no item can read or write the zygote's memory
        _N.join_session_keyring()     # nothing of the worker's keyrings is reachable
        with open(os.path.join(opts.support, "seccomp.bpf"), "rb") as fh:
            opts.seccomp = fh.read()
        with open(os.path.join(opts.support, "seccomp-nosysv.bpf"), "rb") as fh:
            opts.seccomp_nosysv = fh.read()
        opts.landlock = 0 if "no-landlock" in opts.simulate else _N.landlock_abi()
        if not os.path.exists("/proc/self/uid_map"):
            raise OSError("the sandbox has no /proc (a container runtime that masks /proc forbids "
                          "mounting one in a user namespace): the per-item namespaces need it; "
                          "see deploy/README.md")
    except BaseException as e:
        sys.stderr.write("ndtrace: sandbox helper: %r\n" % (e,))
        return EXIT_SETUP
    gc.collect()
    gc.freeze()                   # fewer copy-on-write faults in the forked children
    if not send(sock, {"op": "ready", "python": platform.python_version(), "pid": os.getpid(),
                       "landlock": opts.landlock}):
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
