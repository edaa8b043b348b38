"""ndtrace sandbox zygote and line tracer.

This file is embedded in the Go binary and started inside the sandbox as

    python3 -s -B -P -c <this file> --ctrl-fd 3 --support /.ndtrace --ro PATH... --pyc-root PATH...
            [--own-pidns]
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
until proven otherwise.  The tracer is C (sandbox/native/tracer.c): no Python frame of it is ever
on the stack and its state is C memory; it seals its output with an HMAC chain keyed per item,
and a native audit hook reports any attempt to reach it as `tampered`; Go checks the seals and
every event against the source.

Standard library and the sandbox's own native helper (sandbox/native) only; works on CPython
3.11, 3.12 and 3.13.
"""

import argparse
import ast
import builtins
import codecs
import fcntl
import functools
import gc
import importlib.machinery
import importlib.util
import io
import json
import linecache
import math
import opcode
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

import _signal as _csignal                  # signal/getsignal in C, without signal.py's wrapping
from _hashlib import hmac_digest as _hmac_digest   # HMAC in C (OpenSSL): no Python frame sees the key

EVENTS_FD = 3                 # the events pipe in the item
REQUEST_FD = 4                # the item's request pipe, read and closed before any user code
SYNC_FDS = (5, 6)             # the item's handshake with its init, closed before any user code
MAX_MESSAGE = 64 << 20        # control-socket and request message cap
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

# Modules traced code may not import: ctypes would give it raw memory (the tracer's included), and
# so could the standard library's test modules.  Importing the sandbox's helper is tampering.
# Extension modules load only from the standard library's own directory and the sandbox's
# configured mounts (--ext-root), never those whose file names start with EXT_DENIED.
DENIED_IMPORTS = ("ctypes", "_ctypes", "_ctypes_test", "_testcapi", "_testinternalcapi", "_testbuffer",
                  "_testclinic", "_testimportmultiple", "_testmultiphase", "_testsinglephase",
                  "_xxsubinterpreters", "_xxinterpchannels", "_xxtestfuzz", "xxlimited", "xxlimited_35")
EXT_DENIED = ("_ctypes", "_test", "_xx", "xxlimited")
TAMPER_IMPORTS = ("_ndtrace_native",)

# Namespace and mount flags (linux/sched.h, linux/mount.h).
CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID = 0x20000, 0x8000000, 0x10000000, 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC, MS_REMOUNT = 1, 2, 4, 8, 32
MS_BIND, MS_REC, MS_PRIVATE = 4096, 16384, 1 << 18
MNT_DETACH = 2

_N = None                     # the native helper and tracer (sandbox/native), loaded by main()

_enc = json.encoder.encode_basestring_ascii      # C encoder: str -> quoted, ASCII-only JSON
_type_qualname = type.__dict__["__qualname__"].__get__   # bypasses metaclass overrides
_ADDR_RE = re.compile(r"0x[0-9a-fA-F]{6,}")
_NEWLINE_RE = re.compile(r"\r\n|\r|\n")          # the line breaks the tokenizer counts
_NEWLINE_KEEP_RE = re.compile(r"(\r\n|\r|\n)")  # the same, kept by re.split
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


# --------------------------------------------------------------------------------------------
# The tracer (item process only)
# --------------------------------------------------------------------------------------------
#
# The tracer itself is C (sandbox/native/tracer.c): a trace function with no Python frame and no
# state Python code can reach. This file configures it and drives it: tracer_call runs a function
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
        if ta is _tuple or ta is _frozenset:
            return _len(a) == _len(b) and _all(same_const(x, y) for x, y in _zip(a, b))
        if ta is _CodeType:
            return same_code1(a, b)
        return a == b

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
           "filename": req["filename"], "own_lines": own_lines,
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
    _N.install_audit(_tracer_codes(), _import_codes(), DENIED_IMPORTS, TAMPER_IMPORTS,
                     tuple(req["pyc_roots"]), tuple(req["ext_roots"]), EXT_DENIED)


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
        opts.rw, opts.rw_mode = [], ""
        if hdr["writable"]:
            try:
                opts.rw_mode = _writable_view(hdr["writable"], hdr["writable_bytes"], opts)
                opts.rw = [hdr["writable"]]
            except OSError as e:
                opts.rw_mode = "read-only"
                _report_setup_failure(fds, "writable view of the checkout (read-only instead)", e)
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


# A writable checkout copied file by file holds at most this many entries and bytes (the
# checkout's own limits are far below; this bounds the init's work and the memory the copy takes,
# which no rlimit counts, whatever the folder holds: a sparse file's holes are copied as zeros).
_COPY_MAX_ENTRIES = 200_000
_COPY_MAX_BYTES = 1 << 30


def _writable_view(d, writes, opts):
    """Give the item a writable view of the read-only folder d (a repository checkout), private
    to this item and gone with it; returns how: "overlay" or "copy".

    overlay: an overlayfs over d whose upper layer is a fresh tmpfs of `writes` bytes.  The item
    may then create and change files wherever the checkout's owner could: it needs the checkout
    to be owned by the uid the item runs as (an unprivileged worker's own checkout).  copy: the
    folder is copied into a fresh tmpfs (checkout size plus `writes`) that is bound over d; the
    copy's files belong to the item.  Used where overlay is refused or the item would not own
    the files (a root worker's checkouts belong to host root, which the item's user namespace
    does not map).  The staging tmpfs is detached once the view is mounted, so the item sees
    only d; the view is size-bounded, counted in the item's memory cgroup, and nosuid, nodev."""
    flags = MS_NOSUID | MS_NODEV
    stage = "/tmp/.ndtrace-writable"
    os.mkdir(stage, 0o700)
    try:
        owned = os.stat(d).st_uid == 0      # the item's uid, seen from this user namespace
        plain = not any(c in d for c in ",:\\\n")  # overlay's option syntax
        if owned and plain and "no-overlay" not in opts.simulate:
            _N.mount("tmpfs", stage, "tmpfs", flags, "size=%d,mode=0700" % max(writes, 4096))
            os.mkdir(stage + "/upper", 0o755)
            os.mkdir(stage + "/work", 0o700)
            os.chmod(stage + "/upper", os.stat(d).st_mode & 0o7777)
            base = "lowerdir=%s,upperdir=%s/upper,workdir=%s/work" % (d, stage, stage)
            for data in (base + ",userxattr", base):
                try:
                    _N.mount("overlay", d, "overlay", flags, data)
                    return "overlay"
                except OSError:
                    pass
            _N.umount(stage, MNT_DETACH)
        size = _tree_size(d)
        _N.mount("tmpfs", stage, "tmpfs", flags, "size=%d,mode=0700" % (size + max(writes, 4096)))
        _copy_tree(d, stage + "/copy")
        _N.mount(stage + "/copy", d, None, MS_BIND | MS_REC, None)
        _N.mount(None, d, None, MS_BIND | MS_REMOUNT | flags, None)
        return "copy"
    finally:
        try:
            _N.umount(stage, MNT_DETACH)
        except OSError:
            pass
        os.rmdir(stage)


def _tree_size(d):
    """Bytes the copy of folder d takes: its regular files' sizes plus a block per entry."""
    total, n, todo = 0, 0, [d]
    while todo:
        with os.scandir(todo.pop()) as it:
            for e in it:
                n += 1
                if n > _COPY_MAX_ENTRIES:
                    raise OSError("the checkout has more than %d entries" % _COPY_MAX_ENTRIES)
                st = e.stat(follow_symlinks=False)
                total += 4096
                if e.is_dir(follow_symlinks=False):
                    todo.append(e.path)
                elif e.is_file(follow_symlinks=False):
                    total += st.st_size
                    if total > _COPY_MAX_BYTES:
                        raise OSError("the checkout has more than %d bytes" % _COPY_MAX_BYTES)
    return total


def _copy_tree(src, dst):
    """Copy folder src to dst (which must not exist): directories, regular files with their
    permission bits, symbolic links as links; anything else (fifos, sockets, devices) is left
    out.  Iterative, so no depth of nesting can exhaust the stack."""
    os.mkdir(dst, os.stat(src).st_mode & 0o777)
    todo = [(src, dst)]
    while todo:
        s, t = todo.pop()
        with os.scandir(s) as it:
            for e in it:
                target = os.path.join(t, e.name)
                st = e.stat(follow_symlinks=False)
                mode = st.st_mode & 0o777
                if e.is_symlink():
                    os.symlink(os.readlink(e.path), target)
                elif e.is_dir(follow_symlinks=False):
                    os.mkdir(target, mode | 0o700)
                    todo.append((e.path, target))
                elif e.is_file(follow_symlinks=False):
                    try:
                        fin = os.open(e.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                    except PermissionError:
                        continue        # the item could not read it either
                    try:
                        fout = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC,
                                       mode | 0o600)
                        try:
                            while os.sendfile(fout, fin, None, 1 << 20):
                                pass
                        finally:
                            os.close(fout)
                    finally:
                        os.close(fin)
        os.chmod(t, os.stat(s).st_mode & 0o777 | 0o700)


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
    rules += [(p, ro | rw) for p in getattr(opts, "rw", ())]    # its writable checkout view
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
    req = _prepare(hdr, opts)
    try:
        if req["kind"] == "call":
            _run_call(req)
        elif req["kind"] == "replay":
            try:
                _run_replay(req)
            except BaseException as e:     # the driver's own failure: say what it was
                os.write(2, ("\nreplay driver failed: %r\n" % (e,)).encode("ascii", "replace"))
                raise
        else:
            _run_tests(req)
    finally:
        os._exit(EXIT_TRACER_BUG)


def _prepare(hdr, opts):
    """Read the item's request from its own pipe (the zygote never sees it) and hand the
    tracer its configuration and key.  No frame that outlives this function holds the key."""
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
        req["writable"] = getattr(opts, "rw_mode", "")      # how the checkout is writable
        req["pyc_roots"] = tuple(p.rstrip("/") + "/" for p in opts.pyc_root)
        # the standard library's extension modules (lib-dynload) and the configured mounts
        req["ext_roots"] = tuple(os.path.realpath(p).rstrip("/") + "/" for p in
                                 [p for p in sys.path if p.endswith("lib-dynload")] + opts.ext_root)
        sys.argv = [req["filename"] or req["runner"] or "python"]
        random.seed(req["seed"])
        function_item = req["kind"] == "call" or (req["kind"] == "replay" and not req["dir"])
        if function_item:
            os.chdir("/tmp")
        if req["kind"] == "replay":
            # No C tracer: the replay driver seals its own stream (docs/tracer-protocol.md).
            req["key"] = key
        else:
            _setup_tracer(req, key)
        del key, body
        _N.seal()
        # The PythonPath's .pth files are code of the environment's: they run only once the
        # tracer is set up and sealed (its audit hook on, the code it trusts fixed) and no frame
        # holds the key (an attacker's review: a .pth file read the key from this frame and
        # replaced the sys._getframe _tracer_codes walks).
        # (A function replay adds it itself, once its driver has sealed its first chunk and its
        # audit hook is on, as a repository replay does.)
        if req["kind"] == "call" and req["pythonpath"]:
            _extend_path(None, req["pythonpath"])
    except BaseException as e:
        _report_setup_failure((0, 1, 2), "item request", e)
        os._exit(EXIT_SETUP)
    return req


def _run_call(req):
    """Body of a function-level item: compile, then hand the module body (run untraced) and the
    call (traced) to the tracer, which writes the end record and exits."""
    N = _N
    try:
        tree = ast.parse(req["code"], req["filename"])
        code = compile(tree, req["filename"], "exec", dont_inherit=True)
        call = compile(req["call"], "<call>", "eval", dont_inherit=True)
    except MemoryError:
        N.tracer_end("memory", "MemoryError")
    except Exception as e:
        N.tracer_end("invalid", _qualname(type(e)), str(e))

    # The file's top-level statements (decorators included), statements sharing a line merged:
    # the debugger's CODE context is made of the blocks that contain visited lines.
    blocks = []
    for n in tree.body:
        first = min([n.lineno] + [d.lineno for d in getattr(n, "decorator_list", ())])
        if blocks and first <= blocks[-1][1]:
            blocks[-1][1] = max(blocks[-1][1], n.end_lineno)
        else:
            blocks.append([first, n.end_lineno])
    record = ('{"event":"blocks","file":%s,"blocks":%s}\n'
              % (_enc(req["filename"]), json.dumps(blocks, separators=(",", ":"))))
    lines = [line + "\n" for line in _NEWLINE_RE.split(req["code"])]
    linecache.cache[req["filename"]] = (len(req["code"]), None, lines, req["filename"])

    # A fresh __main__ module: user classes pickle and dataclasses resolve against the user's
    # namespace, and `import __main__` does not reach this file's globals.
    module = types.ModuleType("__main__")
    namespace = module.__dict__
    namespace["__builtins__"] = builtins
    sys.modules["__main__"] = module
    own = _code_objects([code])     # the only code objects of this file that may be traced
    entry = _code_objects([call])   # depth-0 frames are called from these
    del tree, blocks, lines, module
    N.tracer_call(code, call, namespace, record, own, entry)    # never returns


# --------------------------------------------------------------------------------------------
# Replay (kind replay): a row's actions on Python's own debugger, bdb (`ndtrace verify`)
# --------------------------------------------------------------------------------------------
#
# No C tracer runs: bdb is the trace function. The driver executes the module body, then runs
# the row's main() wrapper under a bdb.Bdb whose stops are the row's landing states, maps each
# action to pdb's command (step_into: step, step_over: next, step_return: return, breakpoint:
# a temporary break on every line whose text is the argument then continue, continue: continue)
# and writes every landing state as an event record in sealed chunks (the same wire format and
# seals as a trace; the key stays in this closure and the C HMAC). The traced code shares this
# interpreter, so a Python audit hook ends the replay as tampered the moment the code reaches
# for the debugger's machinery (settrace, frames, gc, monitoring): a replay that was interfered
# with is a disagreement, never an agreement (docs/debugger.md, "Replay on bdb").

_TRACE_EVENTS = frozenset(("call", "line", "return", "exception"))
_REPLAY_ACTIONS = ("step_into", "step_over", "step_return", "breakpoint", "continue")
REPLAY_WRAPPER_FILE = "<ndtrace-main>"
_REPLAY_FRAME_ATTRS = ("tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back")
_REPLAY_DENIED_IMPORTS = DENIED_IMPORTS + TAMPER_IMPORTS
_REPLAY_IMPORT_EVENTS = ("marshal.loads", "code.__new__")   # allowed from the import system only
_REPLAY_DENIED = ("sys.settrace", "sys.setprofile", "sys._getframe", "gc.get_objects",
                  "gc.get_referrers", "gc.get_referents", "sys._current_frames", "sys.addaudithook",
                  "function.__new__", "code.__new__", "marshal.loads", "ctypes.dlopen")


def _replay_phase(*args, **kwargs):
    """A test phase of a repository replay: the replay's trace function counts the entry's
    calls only between this generator's start and its resumption.  Stateless: the runner's
    plugin that holds it gives nothing of the driver's out."""
    yield


def _run_replay(req):
    """Body of a replay item: never returns.  A function-level replay runs the row's main()
    wrapper; a repository replay (req["dir"] set) runs the row's test in its runner and starts
    at the entry call req["entry"] names: the occurrence-th first call (counted from 0, in the
    test's phases, as the tracer records them) of the function qualname of file."""
    import bdb
    key = req.pop("key")
    filename, wfile = req["filename"], REPLAY_WRAPPER_FILE
    test_dir = req["dir"]
    entry = req["entry"]
    actions = [tuple(a) for a in req["actions"]]
    vc = req["limits"]["value_chars"]
    hmac, write, enc, exit_ = _hmac_digest, os.write, _enc, os._exit
    state = {"tag": bytes(32), "events": 0, "count": 0, "guard": False, "done": False,
             "entry": None, "unwinding": False}
    max_events = req["limits"]["max_events"]

    def seal(text):
        data = text.encode("ascii")
        tag = hmac(key, state["tag"] + data, "sha256")
        state["tag"] = tag
        out = data + b"#" + tag.hex().encode("ascii") + b"\n"
        while out:
            n = write(EVENTS_FD, out)
            out = out[n:]

    def end(status, value=None, exc_type=None, exc_message=None):
        if state["done"]:
            exit_(EXIT_TAMPERED)
        state["done"] = True
        rec = '{"event":"end","status":%s' % enc(status)
        if value is not None:
            rec += ',"value":%s' % enc(value)
        if exc_type is not None:
            rec += ',"exc_type":%s,"exc_message":%s' % (enc(exc_type), enc(exc_message or ""))
        seal(rec + ',"events":%d}\n' % state["events"])
        for s in (sys.__stdout__, sys.__stderr__):
            try:
                s.flush()
            except Exception:
                pass
        exit_(0)

    _str, _tuple, _getframe = str, tuple, sys._getframe
    # The standard library's functions that take a frame for a module name or a warning's
    # location and give none out: their sys._getframe is allowed (compared by code object, which
    # the replayed code cannot forge: building code is denied).
    import collections, enum, typing, warnings
    frame_users = frozenset(c for c in (
        getattr(f, "__code__", None) for f in (
            collections.namedtuple, getattr(typing, "_caller", None),
            getattr(enum.EnumType, "_create_", None), warnings.warn)) if c is not None)
    import_codes = frozenset(_import_codes())   # the import system unmarshals .pyc files

    import stat
    pyc_roots, ext_roots = _tuple(req["pyc_roots"]), _tuple(req["ext_roots"])
    _lstat, _islnk, _bytes, _fsdecode = os.lstat, stat.S_ISLNK, bytes, os.fsdecode

    def fs_str(p):
        """p as a str when it is a str or bytes path; None otherwise (no user code runs here)."""
        if type(p) is _str:
            return p
        if type(p) is _bytes:
            return _fsdecode(p)
        return None

    def pyc_allowed(p):
        """As the C hook's: a .pyc opens only from under a read-only root (CPython does not
        verify bytecode, and traced code could craft some in /tmp and import it)."""
        s = fs_str(p)
        if s is None or not s.endswith(".pyc"):
            return True      # a path object's .pyc: the import system passes str paths only
        return (s.startswith("/") and "/../" not in s and "/./" not in s and "//" not in s
                and any(_len(s) > _len(r) and s.startswith(r) for r in pyc_roots))

    def ext_allowed(p):
        """As the C hook's: an extension module loads only from a canonical path (no symbolic
        link, . or ..) under the standard library's or the configured roots, and never one whose
        file name starts with EXT_DENIED (the C hook's realpath, by C calls only)."""
        s = fs_str(p)
        if s is None or not s.startswith("/") or "\0" in s:
            return False
        parts = s.split("/")[1:]
        if "" in parts or "." in parts or ".." in parts:
            return False
        cur = ""
        for part in parts:
            cur += "/" + part
            try:
                if _islnk(_lstat(cur).st_mode):
                    return False
            except OSError:
                return False
        base = parts[-1]
        return (any(_len(s) > _len(r) and s.startswith(r) for r in ext_roots)
                and not any(base.startswith(d) for d in EXT_DENIED))

    def audit(event, args):
        if state["guard"] or state["done"]:
            return
        what = None
        if event == "sys._getframe" or event in _REPLAY_IMPORT_EVENTS:
            state["guard"] = True
            try:
                caller = _getframe(1).f_code
            finally:
                state["guard"] = False
            if caller not in (frame_users if event == "sys._getframe" else import_codes):
                what = event
        elif event in _REPLAY_DENIED or event.startswith("sys.monitoring") or event.startswith("ctypes."):
            what = event
        elif event == "object.__getattr__" and len(args) == 2 and args[1] in _REPLAY_FRAME_ATTRS:
            what = "a frame (%s)" % args[1]
        elif event == "import" and args and type(args[0]) is _str and \
                args[0].partition(".")[0] in _REPLAY_DENIED_IMPORTS:
            what = "import " + args[0]
        # The C tracer's audit hook (install_audit) is not installed in a replay (it would take
        # bdb's settrace for tampering), so its other rules are kept here, with the same effect.
        elif event == "open" and args and not pyc_allowed(args[0]):
            raise PermissionError("ndtrace: bytecode (.pyc) is loaded only from read-only directories")
        elif event == "import" and _len(args) > 1 and args[1] is not None and not ext_allowed(args[1]):
            raise ImportError("ndtrace: extension module %s is not available in the sandbox (native modules "
                              "load only from the standard library and the sandbox's configured packages)"
                              % (args[0],))
        elif event in ("sqlite3.enable_load_extension", "sqlite3.load_extension"):
            raise PermissionError("ndtrace: SQLite extensions are not available in the sandbox")
        if what is not None:
            end("tampered", exc_type="Tampered",
                exc_message="the replayed code used %s (the debugger's machinery)" % what)

    _repr, _len, _type, _getattr, _list = repr, len, type, getattr, list
    addrs = {}

    def ordinal(m):
        return "0x%x" % addrs.setdefault(m.group(0).lower(), len(addrs) + 1)

    def render(v):
        try:
            r = _repr(v)
            if _type(r) is not _str:
                r = "<%s object (repr returned %s)>" % (_qualname(_type(v)), _qualname(_type(r)))
        except BaseException as e:
            r = "<%s object (repr raised %s)>" % (_qualname(_type(v)), _qualname(_type(e)))
        r = _ADDR_RE.sub(ordinal, r)
        if _len(r) > vc:
            r = r[:vc] + "..."
        return r

    def decorated(tree):
        out = {}         # first decorator's line -> the def (or class) line
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.decorator_list:
                out[min(d.lineno for d in node.decorator_list)] = node.lineno
        return out

    lines, def_lines = {}, {}    # file -> its lines; file -> decorated() of it
    if test_dir:
        # The repository's files, as the tracer's test runs target them: under the checkout,
        # never under a PythonPath directory (req["exclude"]).
        prefix, excluded = test_dir.rstrip("/") + "/", _tuple(req["exclude"])
        entry_file, entry_func, entry_nth = entry["file"], entry["qualname"], entry["occurrence"]
        target_of = {}

        def is_target(fn):
            t = target_of.get(fn)
            if t is None:
                t = target_of[fn] = (type(fn) is _str and fn.startswith(prefix)
                                     and not any(fn.startswith(x) for x in excluded))
            return t

        def load(fn):
            """A file of the checkout read as the tracer's helpers read it.  The repository's
            code can run here (the codec a coding cookie names is looked up and decodes), so the
            audit hook watches (an attacker's review: a codec of its own walked the frames while
            the driver's guard was on)."""
            ls = lines.get(fn)
            if ls is None:
                guard, state["guard"] = state["guard"], False
                try:
                    with io.open(fn, "rb") as fh:
                        data = fh.read()
                    enc_, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
                    text = data.decode(enc_)
                    ls = _NEWLINE_RE.split(text)
                    try:
                        def_lines[fn] = decorated(ast.parse(text, fn))
                    except Exception:
                        def_lines[fn] = {}
                except Exception:
                    ls = []
                finally:
                    state["guard"] = guard
                lines[fn] = ls
                linecache.cache[fn] = (1, None, [x + "\n" for x in ls], fn)
            return ls

        counted = is_target
    else:
        try:
            tree = ast.parse(req["code"], filename)
            code = compile(tree, filename, "exec", dont_inherit=True)
            wcode = compile(req["wrapper"], wfile, "exec", dont_inherit=True)
        except Exception as e:
            end("invalid", exc_type=_qualname(type(e)), exc_message=str(e))
        def_lines[filename] = decorated(tree)
        lines = {filename: _NEWLINE_RE.split(req["code"]), wfile: _NEWLINE_RE.split(req["wrapper"])}
        for fn, ls in lines.items():
            linecache.cache[fn] = (1, None, [x + "\n" for x in ls], fn)
        targets = frozenset(lines)
        is_target = targets.__contains__

        def load(fn):
            return lines.get(fn, ())

        def counted(fn):
            return fn == filename
        module = types.ModuleType("__main__")
        namespace = module.__dict__
        namespace["__builtins__"] = builtins
        sys.modules["__main__"] = module
        enter_ns = {}
        exec(compile("def _enter(m):\n    return m()\n", "<ndtrace-replay>", "exec"), enter_ns)
    frames = {}          # id(frame) -> (frame, ordinal); frames kept alive so ids are not reused

    def src_of(fn, lineno):
        ls = load(fn)
        return ls[lineno - 1] if 0 < lineno <= len(ls) else ""

    def in_scope(frame):
        """Whether a frame is the entry's or called from it (a repository replay)."""
        e, f = state["entry"], frame
        while f is not None and f is not e:
            f = f.f_back
        return f is not None

    class Driver(bdb.Bdb):
        def __init__(self):
            super().__init__()
            self.next_action = 0
            self.started = False

        def land(self, frame, event, arg):
            co = frame.f_code
            if not is_target(co.co_filename) or (test_dir and not in_scope(frame)):
                self.skip_frame(frame)
                return
            self.started = True
            k = frames.get(id(frame))
            if k is None or k[0] is not frame:
                k = frames[id(frame)] = (frame, len(frames) + 1)
            # replayed frames below this one: main's (the entry's) is 0
            depth, f = 0, (None if frame is state["entry"] else frame.f_back)
            while f is not None:
                if is_target(f.f_code.co_filename):
                    depth += 1
                f = None if f is state["entry"] else f.f_back
            lineno = frame.f_lineno
            if event == "call":
                # a decorated function's call points at its def line, as the tracer's does
                load(co.co_filename)
                lineno = def_lines.get(co.co_filename, {}).get(lineno, lineno)
            loc = frame.f_locals
            names = [n for n in loc if type(n) is str and not n.startswith(".")
                     and not (n.startswith("__") and n.endswith("__"))]
            rec = ('{"event":%s,"frame":%d,"func":%s,"file":%s,"lineno":%d,"depth":%d,"src":%s,'
                   '"names":[%s],"locals":{%s}'
                   % (enc(event), k[1], enc(getattr(co, "co_qualname", co.co_name)), enc(co.co_filename),
                      lineno, depth, enc(src_of(co.co_filename, lineno)), ",".join(enc(n) for n in names),
                      ",".join("%s:%s" % (enc(n), enc(render(loc[n]))) for n in names)))
            if event == "return":
                rec += ',"value":%s' % enc(render(arg))
            elif event == "exception":
                rec += ',"value":%s,"exc_type":%s' % (enc(render(arg[1])), enc(_qualname(arg[0])))
            state["events"] += 1
            seal(rec + "}\n")
            self.act(frame)

        def skip_frame(self, frame):
            """A stop outside the replayed code (the standard library, the driver): go on as the
            pending command would; past main, stop tracing."""
            f = frame
            while f is not None and not is_target(f.f_code.co_filename):
                f = f.f_back
            if test_dir and f is not None and not in_scope(f):
                f = None
            if f is None and self.started:
                self.finish()
            else:
                self.set_step()

        def finish(self):
            self.clear_all_breaks()
            state["guard"] = True
            try:
                self.set_continue()
            finally:
                state["guard"] = False

        def act(self, frame):
            self.clear_all_breaks()          # breakpoints are temporary: the tree's semantics
            if self.next_action >= len(actions):
                self.finish()                # the row says exit; anything after is a mismatch
                return
            a, arg = actions[self.next_action]
            self.next_action += 1
            if a == "breakpoint" and test_dir:
                # every file of the repository's imported so far (the row's CODE context holds
                # only functions the run visits). Before the guard: a module's dict is the
                # repository's, and a key of its own runs its __eq__ in the lookup (an
                # attacker's review).
                for m in _list(sys.modules.values()):
                    if _type(m) is types.ModuleType:
                        fn = m.__dict__.get("__file__")
                        if _type(fn) is _str and is_target(fn):
                            load(fn)
            state["guard"] = True
            try:
                if a == "step_into":
                    self.set_step()
                elif a == "step_over":
                    self.set_next(frame)
                elif a == "step_return":
                    self.set_return(frame)
                elif a == "breakpoint":
                    for fn, ls in _list(lines.items()):
                        for i, text in enumerate(ls):
                            if text == arg:
                                err = self.set_break(fn, i + 1)
                                if err:
                                    end("invalid", exc_type="ReplayError", exc_message="breakpoint: " + err)
                    self.set_continue()
                else:
                    self.set_continue()
            finally:
                state["guard"] = False

        # The sandbox makes a frame's f_trace read-only (harden_frames), so bdb cannot switch a
        # frame's local tracing off (set_continue) or back on (set_step's fix of bpo-13183).
        # The driver keeps every frame traced instead and lets stop_here/break_here decide, which
        # is what those bdb paths amount to; with no breakpoint, continue only stops the global
        # trace function.
        def trace_dispatch(self, frame, event, arg):
            # The tracer reads a replayed frame's locals at every event, which fixes the order
            # of f_locals (first binding first); so does the replay.
            fn = frame.f_code.co_filename
            if is_target(fn):
                frame.f_locals
                # The tracer's event limit, counted as the tracer counts: the item's own events
                # (the wrapper is not traced), the run ending before the event past the limit.
                if counted(fn) and event in _TRACE_EVENTS:
                    if state["count"] >= max_events:
                        end("event_limit", exc_type="EventLimit",
                            exc_message="trace limit of %d events reached" % max_events)
                    state["count"] += 1
            if frame is not state["entry"]:
                return bdb.Bdb.trace_dispatch(self, frame, event, arg)
            # The entry's frame: the scope ends at its first return event (a generator's
            # first yield), unwinding when its exception event came just before.
            unwinding = state["unwinding"]
            state["unwinding"] = event == "exception"
            out = bdb.Bdb.trace_dispatch(self, frame, event, arg)
            if event == "return":
                if unwinding:
                    end("exception", exc_type="EntryRaised", exc_message="the entry call raised")
                end("ok", value=render(arg))
            return out

        def dispatch_call(self, frame, arg):
            bdb.Bdb.dispatch_call(self, frame, arg)
            return self.trace_dispatch

        def set_step(self):
            self._set_stopinfo(None, None)

        def set_continue(self):
            # The trace function stays: it counts the events toward the tracer's limit.
            self._set_stopinfo(self.botframe, None, -1)

        def user_call(self, frame, arg):
            if self.stop_here(frame):      # as pdb's: bdb also calls it near breakpoints
                self.land(frame, "call", None)

        def user_line(self, frame):
            self.land(frame, "line", None)

        def user_return(self, frame, value):
            self.land(frame, "return", value)

        def user_exception(self, frame, exc_info):
            self.land(frame, "exception", exc_info)

    driver = Driver()
    # A first chunk, sealed before any of the item's code runs (as the C tracer's): from here on
    # an exit with the tracer's own codes is the code's (killed), never a sandbox error, which
    # would end `ndtrace verify` without a verdict (an attacker's review).
    seal("")
    if test_dir:
        _replay_test(req, driver, state, audit, end, entry_file, entry_func, entry_nth)
    for fn in targets:     # bdb looks a breakpoint's line up under the file's canonical name
        linecache.cache[driver.canonic(fn)] = linecache.cache[fn]
    # From here on the item's code may run (its module body first): the audit hook watches it.
    sys.addaudithook(audit)
    sys.gettrace = lambda: None      # the driver's bound method would lead to its state
    try:
        if req["pythonpath"]:
            _extend_path(None, req["pythonpath"])    # the .pth files are the environment's code
        exec(code, namespace)
        # The wrapper's main() is not bound in the module (the item may have a main of its own,
        # which CALL then names); its import (islice) is, unless the module has that name.
        wns = {}
        exec(wcode, namespace, wns)
        main = wns.pop("main")
        for k, v in wns.items():
            namespace.setdefault(k, v)
    except BaseException as e:
        end("invalid", exc_type=_qualname(_type(e)), exc_message="the module body raised: %s" % (e,))

    def stop():
        state["guard"] = True
        sys.settrace(None)

    state["guard"] = True
    driver.reset()
    sys.settrace(driver.trace_dispatch)
    state["guard"] = False
    try:
        result = enter_ns["_enter"](main)
    except MemoryError:
        stop()
        end("memory", exc_type="MemoryError", exc_message="")
    except BaseException as e:
        stop()
        state["guard"] = False
        try:
            msg = str(e)[:1000]
        except BaseException:
            msg = ""
        value = render(e)
        stop()
        end("exception", value=value, exc_type=_qualname(type(e)), exc_message=msg)
    stop()
    state["guard"] = False
    value = render(result)
    stop()
    end("ok", value=value)


def _runner_setup(req, d):
    """Set a test run up in checkout d: the modules preloaded from it purged, its import paths
    and the PythonPath added, a fresh __main__; returns the runner (the request's, else pytest
    when it imports, else unittest)."""
    _purge_preloaded(d, req["pythonpath"])
    _extend_path(d, req["pythonpath"], req["paths"])
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
    return runner


def _replay_test(req, driver, state, audit, end, entry_file, entry_func, entry_nth):
    """A repository replay's run (never returns): the row's test in its runner, set up as the
    tracer's test runs are, with a trace function that only watches calls until the entry's, in
    the test's phases (_replay_phase); there the driver takes over.  The driver ends the run at
    the entry's first return event; a run that never reaches the entry ends invalid."""
    d = req["dir"]
    phase_code = _replay_phase.__code__
    phase_frames = []     # the phases' generator frames (kept alive: ids are not reused)
    entry_frames = []     # the entry function's frames called in a phase so far
    on = [False]
    _getattr, _any, _len = getattr, any, len

    def pre(frame, event, arg):
        if event != "call":
            return None
        co = frame.f_code
        if co is phase_code:
            if _any(f is frame for f in phase_frames):
                on[0] = False            # resumed after its phase
            else:
                phase_frames.append(frame)
                on[0] = True
            return None
        if not on[0] or co.co_filename != entry_file or _getattr(co, "co_qualname", co.co_name) != entry_func:
            return None
        if _any(f is frame for f in entry_frames):
            return None                  # a generator's resumption: not a new call
        entry_frames.append(frame)
        if _len(entry_frames) <= entry_nth:
            return None
        state["entry"] = frame
        state["guard"] = True
        try:
            driver.reset()
            driver.botframe = frame.f_back
            sys.settrace(driver.trace_dispatch)
        finally:
            state["guard"] = False
        return driver.trace_dispatch(frame, event, arg)

    # From here on the repository's code may run (.pth files of the PythonPath, conftest.py, the
    # test module): the audit hook watches it, as a function replay's module body.
    sys.addaudithook(audit)
    sys.gettrace = lambda: None      # the trace functions would lead to the driver's state
    try:
        os.chdir(d)
    except OSError as e:
        end("invalid", exc_type=_qualname(type(e)), exc_message="cannot enter %s: %s" % (d, e.strerror))
    rstate = types.SimpleNamespace(tests=None, errors=[], verdicts=[], failure=None, fatal=None,
                                   excs=[], exc_message=lambda e: "", options=None, fallback=False)
    try:
        runner = _runner_setup(req, d)
        state["guard"] = True
        sys.settrace(pre)
        state["guard"] = False
        if runner == "pytest":
            _pytest_run(req, rstate, lambda exc, when: None, _replay_phase)
        else:
            _unittest_run(req, rstate, lambda exc, when: None, _replay_phase)
    except BaseException as e:
        state["guard"] = True
        sys.settrace(None)
        end("invalid", exc_type="ReplayError", exc_message="the test runner raised %s before the entry call"
            % _qualname(type(e)))
    state["guard"] = True
    sys.settrace(None)
    end("invalid", exc_type="ReplayError", exc_message="the test ran without reaching the entry call "
        "(call %d of %s in %s)" % (entry_nth + 1, entry_func, entry_file))


# --------------------------------------------------------------------------------------------
# Test runs (kind collect / test): a repository's test suite, one test per item
# --------------------------------------------------------------------------------------------

_MISSING_RE = re.compile(r"No module named '([^']+)'")
# Top-level names of the third-party modules the zygote imported for pytest (None: not tried).
_PRELOADED = {"tops": None}


def _run_tests(req):
    """Body of a collect or test item: never returns.

    The tracer seals its first chunk before anything of the repository's can run (its own
    pytest.py, .pth files of the PythonPath): from then on, an exit is the item's.  The
    repository's code runs inside the runner (conftest, test modules, fixtures) and may rebind
    this file's globals and builtins; the tracer's functions refuse any call with the item's code
    on the stack.  Nothing that renders an exception runs while a phase is recorded: the runner's
    hooks only keep the exceptions, and their messages are taken after the run."""
    N = _N
    start, end, end_exception, exc_message = N.tracer_start, N.tracer_end, N.tracer_end_exception, N.exc_message
    _BaseException = BaseException
    d = req["dir"]
    start(bool(req["traced"] and req["kind"] == "test"))
    try:
        os.chdir(d)
    except OSError as e:
        end("invalid", _qualname(type(e)), "cannot enter %s: %s" % (d, e.strerror))
    state = types.SimpleNamespace(tests=None, errors=[], verdicts=[], failure=None, fatal=None,
                                  excs=[], exc_message=exc_message, options=None, fallback=False)

    def note(exc, when):
        """Keep the exception of a failure (the first one is reported)."""
        if exc is not None:
            state.excs.append(exc)
            if state.failure is None:
                state.failure = (when, exc)

    try:
        runner = _runner_setup(req, d)
        if runner == "pytest":
            _pytest_run(req, state, note)
        else:
            _unittest_run(req, state, note)
    except _BaseException as e:         # the runner (or the repository's code) raised: no verdict
        end_exception(e)
    try:
        _test_records(req, runner, state, end, exc_message)
    except _BaseException as e:
        end("exception", _qualname(type(e)), exc_message(e))


def _test_records(req, runner, state, end, exc_message):
    """The collection or test record of a run and its end (never returns)."""
    enc, _map, join, _str, d = _enc, map, ",".join, str, req["dir"]
    missing = ""
    for exc in state.excs:
        try:                  # the exceptions are the repository's: their attributes may raise
            m = _missing_module(exc, d, req["pythonpath"])
        except BaseException:
            m = None
        if m:
            missing = m
            break
    opts = getattr(state, "options", None)
    neutralised = "[%s]" % join(_map(enc, opts.neutralised if opts is not None else []))
    if req["kind"] == "collect":
        record = ('{"event":"collection","runner":%s,"tests":[%s],"errors":[%s],'
                  '"missing_module":%s,"neutralised":%s,"original_runnable":%s,"fallback":%s,"writable":%s}\n'
                  % (enc(runner), join(_map(enc, state.tests or [])),
                     join(_map(enc, state.errors)), enc(missing), neutralised,
                     "true" if opts is None or opts.runnable else "false",
                     "true" if getattr(state, "fallback", False) else "false",
                     enc(_str(req.get("writable", "")))))
        if state.fatal is not None:
            end("exception", state.fatal[0], state.fatal[1], record)
        end("ok", record=record)
    outcome = _verdict(state.verdicts)
    when, exc_type, exc_msg = "", "", ""
    if state.failure is not None:
        try:
            exc = _unwrap(state.failure[1])
        except BaseException:
            exc = state.failure[1]
        when, exc_type, exc_msg = state.failure[0], _qualname(type(exc)), exc_message(exc)
    if state.fatal is not None and not state.verdicts and state.failure is None:
        when, exc_type, exc_msg = "collect", state.fatal[0], state.fatal[1]
    if outcome not in ("failed", "error"):
        missing = ""
        when = exc_type = exc_msg = ""
    record = ('{"event":"test","runner":%s,"outcome":%s,"missing_module":%s,"when":%s,'
              '"exc_type":%s,"exc_message":%s,"neutralised":%s,"writable":%s}\n'
              % (enc(_str(runner)), enc(_str(outcome)), enc(_str(missing)), enc(_str(when)),
                 enc(_str(exc_type)), enc(_str(exc_msg)), neutralised, enc(_str(req.get("writable", "")))))
    end("ok", record=record)


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


# --------------------------------------------------------------------------------------------
# Runner options: what of a repository's pytest configuration a test run neutralises
# --------------------------------------------------------------------------------------------

# Beyond these, a repository's addopts are dropped whole ("addopts" is listed as neutralised).
_ADDOPTS_MAX_CHARS = 64 * 1024
_ADDOPTS_MAX_TOKENS = 2000
# At most this many neutralised options are listed (then "..."), each at most this long.
_NEUTRALISED_MAX = 50
_NEUTRALISED_NAME_MAX = 100

# Options that are always dropped from addopts: name -> (arity, class, owning plugin module).
# arity: 0 (a flag), 1 (one value), "?" (an optional value).  Classes: "coverage" (coverage
# installs its own trace function, which would fight sys.settrace), "xdist" (we run one test per
# process), "report" (files written outside the run), "runner" (options that change how we run
# pytest: its config file, rootdir, conftest cut, basetemp, a mode that runs no test, a debugger,
# the cache we disable).  The original configuration counts as runnable only when every dropped
# option is of the first three classes and its plugin is importable (None: pytest's own plugin).
_ALWAYS_DROPPED = {}


def _always_dropped(cls, plugin, arity, *names):
    for n in names:
        _ALWAYS_DROPPED[n] = (arity, cls, plugin)


_always_dropped("coverage", "pytest_cov", "?", "--cov")
_always_dropped("coverage", "pytest_cov", 1, "--cov-report", "--cov-config", "--cov-fail-under",
                "--cov-context", "--cov-precision")
_always_dropped("coverage", "pytest_cov", 0, "--no-cov", "--no-cov-on-fail", "--cov-append",
                "--cov-branch", "--cov-reset")
_always_dropped("xdist", "xdist", 1, "-n", "--numprocesses", "--maxprocesses",
                "--max-worker-restart", "--dist", "--tx", "--px", "--rsyncdir", "--rsyncignore",
                "--maxschedchunk")
_always_dropped("xdist", "xdist", 0, "-d", "-f", "--looponfail", "--boxed", "--distload",
                "--loadscope-reorder", "--no-loadscope-reorder")
_always_dropped("report", None, 1, "--junitxml", "--junit-xml", "--log-file", "--pastebin")
_always_dropped("report", "pytest_reportlog", 1, "--report-log")
_always_dropped("report", "pytest_html", 1, "--html", "--css")
_always_dropped("report", "pytest_html", 0, "--self-contained-html")
_always_dropped("report", "pytest_jsonreport", 1, "--json-report-file")
_always_dropped("report", "pytest_jsonreport", 0, "--json-report")
_always_dropped("report", "allure_pytest", 1, "--alluredir")
_always_dropped("report", "", 1, "--resultlog", "--result-log")      # gone since pytest 6
_always_dropped("runner", "", 1, "-c", "--config-file", "--rootdir", "--confcutdir", "--basetemp",
                "--pdbcls", "--lfnf", "--last-failed-no-failures", "--inifile")
_always_dropped("runner", "", "?", "--debug", "--cache-show")
_always_dropped("runner", "", 0, "--collect-only", "--co", "-h", "--help", "-V", "--version",
                "--fixtures", "--funcargs", "--fixtures-per-test", "--markers", "--setup-only",
                "--setup-plan", "--pdb", "--trace", "--lf", "--last-failed", "--ff",
                "--failed-first", "--nf", "--new-first", "--sw", "--stepwise", "--sw-skip",
                "--stepwise-skip", "--cache-clear")
# Plugins (-p NAME, by module or entry-point name) dropped like their options.
_ALWAYS_DROPPED_PLUGINS = {"pytest_cov": ("coverage", "pytest_cov"), "cov": ("coverage", "pytest_cov"),
                           "xdist": ("xdist", "xdist"), "pytest_xdist": ("xdist", "xdist"),
                           "xdist.plugin": ("xdist", "xdist"),
                           "xdist.looponfail": ("xdist", "xdist")}
# Ini keys a repository may not override from addopts (-o KEY=VALUE).
_PROTECTED_INI = ("addopts", "required_plugins", "log_file", "cache_dir")


def _runner_options(req, d):
    """The repository's addopts as this run applies them (issue 13).

    Returns (args, opts): args to append to pytest's command line (-o addopts=..., -o
    required_plugins=) and opts, a namespace: kept (the addopts tokens passed on), pending (groups
    of options pytest's own parser does not know before the repository's plugins and conftest.py
    files are loaded: kept for now, dropped later if still unknown), neutralised (names of what
    was dropped) and runnable (whether the original configuration would run in the sandbox: only
    coverage, xdist and report options whose plugins are importable were dropped).  Nothing of
    the repository's is imported or run here: files are read, modules located, never executed."""
    mode = req.get("options", "")
    opts = types.SimpleNamespace(kept=None, pending=[], neutralised=[], runnable=True,
                                 had_addopts=False)
    inicfg = _pytest_inicfg(req, d)
    raw = _ini_value(inicfg.get("addopts")) if inicfg else None
    required = _ini_value(inicfg.get("required_plugins")) if inicfg else None
    args = []
    if raw is None or raw == "" or raw == []:
        tokens = []
    elif mode == "none":
        tokens = None
    else:
        tokens = _addopts_tokens(raw)
    if tokens is None:                  # dropped whole: the fallback, or beyond reason
        _neutralise(opts, "addopts", False)
        opts.kept = []
        args += ["-o", "addopts="]
    elif tokens:
        opts.had_addopts = True
        kept = []
        actions = _known_actions()
        for g in _group_options(tokens, actions, d):
            keep, cls, plugin = _judge(g, req, d, mode, actions)
            if keep == "pending":
                opts.pending.append((len(kept), g))
                kept += g.tokens
            elif keep:
                kept += g.tokens
            elif g.name is not None:
                _neutralise(opts, g.label, _runnable(cls, plugin))
        opts.kept = kept
        args += ["-o", "addopts=" + _shlex_join(kept)]
    if required and mode != "original":
        _neutralise(opts, "required_plugins", _dists_installed(required))
        args += ["-o", "required_plugins="]
    return args, opts


def _neutralise(opts, name, runnable):
    if len(opts.neutralised) >= _NEUTRALISED_MAX:
        if opts.neutralised[-1] != "...":
            opts.neutralised[-1] = "..."
    else:
        name = name[:_NEUTRALISED_NAME_MAX]
        if name not in opts.neutralised:
            opts.neutralised.append(name)
    opts.runnable = opts.runnable and runnable


def _ini_value(v):
    """An ini value as pytest holds it: str, list of str, or (newer pytest) an object whose
    .value is one of these; None otherwise."""
    if not isinstance(v, (str, list)):
        v = getattr(v, "value", None)
    if isinstance(v, list):
        return [str(x) for x in v]
    return v if isinstance(v, str) else None


def _addopts_tokens(raw):
    """addopts split as pytest splits them (shlex), or None when it cannot be used at all."""
    import shlex
    if isinstance(raw, list):
        tokens = raw
        if sum(len(t) for t in tokens) > _ADDOPTS_MAX_CHARS:
            return None
    else:
        if len(raw) > _ADDOPTS_MAX_CHARS:
            return None
        try:
            tokens = shlex.split(raw)
        except ValueError:              # unbalanced quotes: pytest would fail on it
            return None
    if len(tokens) > _ADDOPTS_MAX_TOKENS or any("\x00" in t for t in tokens):
        return None
    return tokens


def _shlex_join(tokens):
    import shlex
    return " ".join(shlex.quote(t) for t in tokens)


def _pytest_inicfg(req, d):
    """The ini values of the config file pytest will use for this run (pytest.ini, .pytest.ini,
    pyproject.toml [tool.pytest.ini_options], tox.ini [pytest], setup.cfg [tool:pytest]), found
    with pytest's own determine_setup (whose signature differs between pytest 7 and 8), else with
    our own search; {} when there is none or it does not parse (pytest then says why)."""
    from pathlib import Path
    args = [] if req["kind"] == "collect" else [req["test"]]
    try:
        import inspect
        from _pytest.config import findpaths
        fn = findpaths.determine_setup
        given = {"inifile": None, "args": args, "rootdir_cmd_arg": d,
                 "invocation_dir": Path(d), "config": None}
        params = inspect.signature(fn).parameters
        res = fn(**{k: v for k, v in given.items() if k in params})
        for v in res:
            if isinstance(v, dict):
                return v
    except BaseException:
        pass
    try:
        return _own_inicfg(d, args)
    except BaseException:
        return {}


def _own_inicfg(d, args):
    """pytest's config-file search, for a pytest whose determine_setup we cannot call."""
    start = d
    if args:
        p = os.path.join(d, args[0].split("::")[0])
        start = p if os.path.isdir(p) else os.path.dirname(p)
    base = os.path.abspath(start)
    while True:
        for name in ("pytest.ini", ".pytest.ini", "pyproject.toml", "tox.ini", "setup.cfg"):
            p = os.path.join(base, name)
            if not os.path.isfile(p):
                continue
            if name.endswith(".toml"):
                import tomllib
                with open(p, "rb") as f:
                    cfg = tomllib.load(f).get("tool", {}).get("pytest", {}).get("ini_options")
                if isinstance(cfg, dict):
                    return {k: v if isinstance(v, list) else str(v) for k, v in cfg.items()}
                continue
            import iniconfig
            ini = iniconfig.IniConfig(p)
            section = "tool:pytest" if name == "setup.cfg" else "pytest"
            if section in ini:
                return dict(ini[section].items())
            if name in ("pytest.ini", ".pytest.ini"):
                return {}
        parent = os.path.dirname(base)
        if parent == base:
            return {}
        base = parent


class _OptGroup:
    """One option of addopts with its values (name None: a positional argument; "--": the
    end of options, with everything after it)."""
    __slots__ = ("name", "tokens", "value")

    def __init__(self, name, tokens, value=None):
        self.name, self.tokens, self.value = name, tokens, value

    @property
    def label(self):
        if self.name in ("-p", "-o", "--override-ini") and self.value is not None:
            return "%s %s" % (self.name, self.value)
        return self.name


def _known_actions():
    """Option string -> arity (0, 1, "?", "*", "+", n) of pytest's own options (its default
    plugins, the cache provider blocked as in our runs); {} if that pytest will not say."""
    try:
        from _pytest.config import get_config
        parser = get_config(["-p", "no:cacheprovider"])._parser._getparser()
        out = {}
        for s, a in parser._option_string_actions.items():
            out[s] = 1 if a.nargs is None else a.nargs
        return out
    except BaseException:
        return {}


def _group_options(tokens, actions, d):
    """Split addopts tokens into options with their values, as argparse would."""
    def arity(name):
        if name in _ALWAYS_DROPPED:
            return _ALWAYS_DROPPED[name][0]
        return actions.get(name, "unknown")

    def is_value(t):
        return not t.startswith("-") or t == "-" or t[1:2].isdigit()

    groups = []
    i, n = 0, len(tokens)
    while i < n:
        tok = tokens[i]
        i += 1
        if tok == "--":
            groups.append(_OptGroup("--", tokens[i - 1:]))
            break
        if not tok.startswith("-") or tok == "-":
            groups.append(_OptGroup(None, [tok]))
            continue
        if tok.startswith("--"):
            name, eq, value = tok.partition("=")
            attached = bool(eq)
        else:
            name, value = tok[:2], tok[2:]
            attached = bool(value)
            if attached and arity(name) == 0:
                # a cluster of short flags (-vx), possibly ending with one that takes a value
                j = 1
                while j < len(tok):
                    f = "-" + tok[j]
                    if arity(f) == 0:
                        groups.append(_OptGroup(f, [f]))
                        j += 1
                        continue
                    rest = tok[j + 1:]
                    g = _OptGroup(f, [f + rest] if rest else [f], rest or None)
                    if not rest and i < n and is_value(tokens[i]) and arity(f) != "unknown":
                        g.tokens.append(tokens[i])
                        g.value = tokens[i]
                        i += 1
                    groups.append(g)
                    break
                continue
            if value.startswith("=") and name in ("-p", "-o"):
                value = value[1:]
        g = _OptGroup(name, [tok], value if attached else None)
        a = arity(name)
        if not attached:
            if a in (1, "?") and i < n and is_value(tokens[i]):
                g.value = tokens[i]
                g.tokens.append(tokens[i])
                i += 1
            elif a in ("*", "+"):
                while i < n and is_value(tokens[i]):
                    g.tokens.append(tokens[i])
                    i += 1
            elif type(a) is int and a > 1:
                g.tokens += tokens[i:i + a]
                i += a
            elif a == "unknown" and i < n and is_value(tokens[i]) and not _exists(d, tokens[i]):
                # an option of a plugin or conftest.py we do not know: its value, unless it
                # names a file (a test path given in addopts)
                g.value = tokens[i]
                g.tokens.append(tokens[i])
                i += 1
        groups.append(g)
    return groups


def _exists(d, t):
    try:
        return os.path.exists(os.path.join(d, t.split("::")[0]))
    except (OSError, ValueError):
        return False


def _judge(g, req, d, mode, actions):
    """Keep (True), drop (False) or decide later ("pending") one option group; with the class
    and owning plugin of a dropped one."""
    if g.name is None:
        # A positional argument (a test path): it selects what is collected; a test run names
        # its one test itself.
        return req["kind"] == "collect", "", ""
    if g.name == "--":
        # everything after it, our own options included, would be file names
        return False, "runner", ""
    if mode == "original":
        return True, "", ""
    if g.name in ("-o", "--override-ini"):
        key = (g.value or "").partition("=")[0].strip()
        return key not in _PROTECTED_INI, "runner", ""
    if g.name == "-p":
        v = (g.value or "").strip()
        if v.startswith("no:"):
            return True, "", ""
        if v in _ALWAYS_DROPPED_PLUGINS:
            cls, plugin = _ALWAYS_DROPPED_PLUGINS[v]
            return False, cls, plugin
        return _plugin_importable(v, d), "plugin", ""
    if g.name in _ALWAYS_DROPPED:
        _, cls, plugin = _ALWAYS_DROPPED[g.name]
        return False, cls, plugin
    if g.name not in actions:
        return "pending", "", ""  # a plugin's or conftest.py's option: pytest's parser decides
    return True, "", ""          # pytest's own options stay


def _runnable(cls, plugin):
    if cls in ("coverage", "xdist", "report"):
        return plugin is None or (plugin != "" and _plugin_importable(plugin, None))
    return False


def _plugin_importable(name, d):
    """Whether -p NAME would load: a pytest built-in plugin, an entry-point plugin of that name,
    or a module that can be found (located, not imported: no code of it runs)."""
    if not name or len(name) > 200:
        return False
    try:
        from _pytest.config import builtin_plugins
        if name in builtin_plugins:
            return True
    except BaseException:
        pass
    parts = name.split(".")
    if all(p.isidentifier() for p in parts):
        try:
            spec = importlib.util.find_spec(parts[0])
            for p in parts[1:]:
                locs = spec.submodule_search_locations if spec is not None else None
                if not locs:
                    spec = None
                    break
                spec = importlib.machinery.PathFinder.find_spec(p, list(locs))
            if spec is not None:
                return True
        except BaseException:
            pass
    try:
        import importlib.metadata as md
        return any(ep.name == name for ep in md.entry_points(group="pytest11"))
    except BaseException:
        return False


def _dists_installed(required):
    """Whether every distribution a required_plugins value names is installed."""
    try:
        import importlib.metadata as md
        names = required if isinstance(required, list) else required.split()
        for r in names:
            m = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", r.strip())
            if m is None:
                return False
            md.distribution(m.group(0))
        return True
    except BaseException:
        return False


def _drop_unknown(opts, parser, args):
    """In pytest's own run, once its plugins and the initial conftest.py files are loaded: drop
    from the addopts at the head of args the pending options its parser still does not know.
    When args do not start with the addopts we passed (a pytest that builds them otherwise),
    nothing is dropped: pytest then fails with a usage error and the Go side runs again without
    addopts."""
    kept = opts.kept
    if not opts.pending or kept is None or list(args[:len(kept)]) != kept:
        return
    drop = {}
    for start, g in opts.pending:
        try:
            _, unknown = parser.parse_known_and_unknown_args(list(g.tokens))
        except BaseException:
            continue                    # known, with a bad value: pytest will say so
        if unknown:
            drop[start] = len(g.tokens)
            _neutralise(opts, g.label, False)
    if not drop:
        return
    new, i = [], 0
    while i < len(kept):
        if i in drop:
            i += drop[i]
            continue
        new.append(kept[i])
        i += 1
    args[:len(kept)] = new
    opts.kept = new


def _pytest_run(req, state, note, phase=None):
    """Collect or run one test with pytest, in this process; phase (a replay's) wraps each
    phase of the test as _phase does for a traced run."""
    import pytest
    if req["traced"] and req["kind"] == "test":
        # Phases start only from pluggy's hook callers (wherever this pytest's pluggy came from).
        callers = sys.modules.get("pluggy._callers")
        _N.tracer_phases(_code_objects([v.__code__ for v in vars(callers).values()
                                        if isinstance(v, types.FunctionType)]) if callers else [])
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

    if (req["traced"] or phase is not None) and not collect:
        # Each phase runs inside _phase, whose own events the tracer watches.
        wrap = pytest.hookimpl(hookwrapper=True, tryfirst=True)
        Plugin.pytest_runtest_setup = wrap(phase or _phase)
        Plugin.pytest_runtest_call = wrap(phase or _phase)
        Plugin.pytest_runtest_teardown = wrap(phase or _phase)

    # The repository's addopts, as this run applies them (see _runner_options); PYTEST_ADDOPTS
    # and PYTEST_PLUGINS never apply (a .pth file of the checkout's may have set them by now).
    os.environ.pop("PYTEST_ADDOPTS", None)
    os.environ.pop("PYTEST_PLUGINS", None)
    try:
        extra, ropts = _runner_options(req, d)
    except Exception:                   # never expected: then no addopts at all
        extra, ropts = ["-o", "addopts="], types.SimpleNamespace(
            kept=[], pending=[], neutralised=["addopts"], runnable=False, had_addopts=False)
    state.options = ropts
    if ropts.pending:
        def initial_conftests(self, early_config, parser, args):
            yield
            _drop_unknown(ropts, parser, args)
        Plugin.pytest_load_initial_conftests = pytest.hookimpl(hookwrapper=True)(initial_conftests)

    common = ["-p", "no:cacheprovider", "--rootdir", d, "--confcutdir", d, "--assert=plain"] + extra
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
                           "import: %s" % state.exc_message(conftest[0]))
        elif code == 4 and ropts.had_addopts and req.get("options", "") == "":
            # Still a usage error with the repository's addopts (what was kept of them): the Go
            # side collects again without any (options "none").
            state.fallback = True
    elif not collect and not state.verdicts and state.failure is None:
        state.fatal = ("PytestExit", "pytest exited with code %d: no test matched %r"
                       % (code, req["test"]))


def _unittest_run(req, state, note, phase_fn=None):
    """Discover or run one test with unittest, in this process; phase_fn (a replay's) wraps the
    run as _phase does for a traced run."""
    import unittest
    import unittest.suite
    d = req["dir"]
    loader = unittest.TestLoader()
    if req["kind"] == "collect":
        try:
            suite = loader.discover(d, top_level_dir=d)
        except Exception as e:
            state.fatal = (_qualname(type(e)), state.exc_message(e))
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
        if phase_fn is not None:
            suite = _replay_suite(loader, req["test"])
        else:
            suite = loader.loadTestsFromName(req["test"])
    except Exception as e:
        state.verdicts.append("error")
        note(e, "collect")
        return
    result = Result()
    if req["traced"]:
        _N.tracer_phases(_code_objects([_unittest_run.__code__]))
    phase = _phase() if req["traced"] else (phase_fn() if phase_fn is not None else None)
    if phase is not None:
        next(phase)               # recording from here
    try:
        suite.run(result)
    finally:
        if phase is not None:
            next(phase, None)     # to here
    if not state.verdicts:
        state.fatal = ("LookupError", "no test matched %r" % (req["test"],))


def _replay_suite(loader, name):
    """loader.loadTestsFromName(name), for a replay: the test's module is found first (its
    longest importable dotted prefix), so that unittest does not try to import the longer ones and
    format the traceback of each failure (which reads frames: the replay's audit hook ends the
    replay at that).  The module and the test are the same as loadTestsFromName's."""
    import importlib
    import importlib.util
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        mod = ".".join(parts[:i])
        try:
            spec = importlib.util.find_spec(mod)
        except Exception:        # a parent that is not a package, or whose import failed
            spec = None
        if spec is None:
            continue
        if i == len(parts):
            return loader.loadTestsFromName(name)
        return loader.loadTestsFromName(".".join(parts[i:]), importlib.import_module(mod))
    return loader.loadTestsFromName(name)


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


def _extend_path(d, pythonpath, paths=()):
    """sys.path = [dir (if given)] + paths (the checkout's import roots) + standard library + the
    PythonPath site dirs (with their .pth files) + the interpreter's own site/dist-packages."""
    import site
    first = ([d] if d else []) + [p for p in paths if p != d]
    before = [p for p in sys.path if p not in first]
    for p in pythonpath:
        site.addsitedir(p)
    added = [p for p in sys.path if p not in before and p not in first]
    at = next((i for i, p in enumerate(before)
               if p.endswith(("site-packages", "dist-packages"))), len(before))
    sys.path[:] = first + before[:at] + added + before[at:]


def _preload(req):
    """Zygote only: import the interpreter's own pytest once, before the first pytest item is
    forked, so items do not pay for it.  Only code under the interpreter's prefix runs here:
    the zygote's sys.path holds neither the repository nor any PythonPath entry."""
    if _PRELOADED["tops"] is not None or req["kind"] in ("call", "replay") or req["runner"] == "unittest":
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
    if kind not in ("call", "collect", "test", "replay"):
        raise ProtocolError("run: unknown kind %r" % (kind,))
    if msg.get("runner", "") not in ("", "pytest", "unittest"):
        raise ProtocolError("run: unknown runner %r" % (msg.get("runner"),))
    writable, writable_bytes = msg.get("writable", ""), msg.get("writable_bytes", 0)
    if type(writable) is not str or type(writable_bytes) is not int or writable_bytes < 0:
        raise ProtocolError("run: writable must be a path and writable_bytes a count")
    if writable and (kind == "call" or not writable.startswith("/")
                     or os.path.normpath(writable) != writable or writable == "/"):
        raise ProtocolError("run: writable must be a clean absolute path, for test runs (and their "
                            "replays) only")
    return {"id": msg["id"], "kind": kind, "runner": msg.get("runner", ""),
            "limits": _check_limits(msg.get("limits", {})),
            "writable": writable, "writable_bytes": writable_bytes}


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
    entry = None
    if kind == "replay" and msg.get("dir"):
        # a repository replay: the row's test and its entry call
        if type(msg["dir"]) is not str or not msg["dir"].startswith("/"):
            raise ProtocolError("run: dir must be an absolute path")
        if type(msg.get("test")) is not str or not msg["test"]:
            raise ProtocolError("run: test must be a non-empty string")
        entry = msg.get("entry")
        if (type(entry) is not dict or type(entry.get("file")) is not str or not entry["file"].startswith("/")
                or type(entry.get("qualname")) is not str or not entry["qualname"]
                or type(entry.get("occurrence")) is not int or entry["occurrence"] < 0):
            raise ProtocolError("run: a repository replay needs entry {file, qualname, occurrence}")
        entry = {"file": entry["file"], "qualname": entry["qualname"], "occurrence": entry["occurrence"]}
    if kind in ("call", "replay"):
        if entry is None:
            need("code", str)
            need("filename", str)
            need("call", str)
        if kind == "replay":
            if entry is None:
                need("wrapper", str)
            actions = msg.get("actions") or []
            if type(actions) is not list:
                raise ProtocolError("run: actions must be a list")
            if not all(type(a) is list and len(a) == 2 and a[0] in _REPLAY_ACTIONS and type(a[1]) is str
                       for a in actions):
                raise ProtocolError("run: actions must be [action, argument] pairs")
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
    for key in ("exclude", "pythonpath", "paths"):
        v = msg.get(key) or []
        if type(v) is not list or not all(type(t) is str and t.startswith("/") for t in v):
            raise ProtocolError("run: %s must be a list of absolute paths" % key)
    if type(msg.get("seed", 0)) not in (int, str, float, type(None)):
        raise ProtocolError("run: bad seed")
    if type(msg.get("naive", False)) is not bool:
        raise ProtocolError("run: naive must be a boolean")
    if msg.get("options", "") not in ("", "original", "none"):
        raise ProtocolError("run: options must be \"\", \"original\" or \"none\"")
    return {"id": hdr["id"], "kind": kind, "code": msg.get("code", ""),
            "filename": msg.get("filename", ""), "call": msg.get("call", ""),
            "targets": targets, "seed": msg.get("seed", 0),
            "naive": msg.get("naive", False), "limits": hdr["limits"],
            "dir": msg.get("dir", ""), "runner": hdr["runner"],
            "test": msg.get("test", ""), "traced": msg.get("traced", False),
            "exclude": msg.get("exclude") or [], "pythonpath": msg.get("pythonpath") or [],
            "options": msg.get("options", ""), "paths": msg.get("paths") or [],
            "wrapper": msg.get("wrapper", ""), "actions": msg.get("actions") or [], "entry": entry}


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
    p.add_argument("--pyc-root", action="append", default=[])
    p.add_argument("--ext-root", action="append", default=[])
    p.add_argument("--cgroup-fd", type=int)
    p.add_argument("--tmp-bytes", type=int, default=64 << 20)
    p.add_argument("--shm-bytes", type=int, default=16 << 20)
    p.add_argument("--unsandboxed-item")                          # tests: see unsandboxed_item
    p.add_argument("--native")
    p.add_argument("--simulate", action="append", default=[])   # tests: no-landlock, ro-sysctl
    opts = p.parse_args(argv)
    if opts.unsandboxed_item is not None:
        if not opts.native:
            p.error("--unsandboxed-item needs --native PATH")
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
    """Every code object of this file: the module's code and everything nested in it, with the
    one-line -c program that compiled it (sandbox.tracerBootstrap): the module-level frames at
    the bottom of every process started from this file.  Recomputed where needed, never kept
    in a global: a list of the tracer's code objects is exactly what traced code must not
    find."""
    frames, f = [], sys._getframe()
    while f is not None:
        frames.append(f)
        f = f.f_back
    roots = []
    for f in reversed(frames):
        if f.f_code.co_name != "<module>" or f.f_code.co_filename != "<string>":
            break
        roots.append(f.f_code)
    return _code_objects(roots)


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


def unsandboxed_item(opts):
    """Tests only (--unsandboxed-item HEADER): run one function item in this very process, with
    no isolation at all: the request on fd 4, the events on fd 3, stdout and stderr as they are.
    It checks the tracer on interpreters the sandbox cannot use (Go's tests run it on every
    CPython at hand, with programs of their own); never give it code you did not write."""
    global _N
    try:
        _N = _load_native(opts.native)
        sys.modules.pop("_ndtrace_native", None)
        _N.harden_frames()
        hdr = validate_run(dict(json.loads(opts.unsandboxed_item), op="run"), [-1] * 4)
        if hdr["kind"] != "call":
            raise ProtocolError("--unsandboxed-item runs function items only")
        opts.ro = opts.pyc_root = sorted({sys.prefix, sys.base_prefix, "/usr"})
        opts.ext_root = []
    except BaseException as e:
        sys.stderr.write("ndtrace: unsandboxed item: %r\n" % (e,))
        return EXIT_SETUP
    req = _prepare(hdr, opts)
    try:
        _run_call(req)
    finally:
        os._exit(EXIT_TRACER_BUG)


def main(argv):
    global _N
    opts = parse_args(argv)
    if opts.unsandboxed_item is not None:
        return unsandboxed_item(opts)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sock = socket.socket(fileno=opts.ctrl_fd)
    sock.settimeout(None)
    try:
        _N = _load_native(os.path.join(opts.support, "_ndtrace_native.so"))
        sys.modules.pop("_ndtrace_native", None)   # the loader caches it: traced code may not
        _N.set_dumpable(0)            # no item can read or write the zygote's memory
        _N.join_session_keyring()     # nothing of the worker's keyrings is reachable
        _N.harden_frames()            # frames' tracing attributes read-only, in every item
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
