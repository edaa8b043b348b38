"""ndtrace sandbox zygote and line tracer.

The tracer's Python is eight files (sandbox/tracer/, this is part 1 of 8), embedded in the Go
binary, written to the sandbox's read-only support directory and started inside the sandbox as

    python3 -s -B -P -c "exec(compile(b''.join([open('/.ndtrace/common.py', 'rb').read(), ...]),
                                      '<string>', 'exec'))"
            --ctrl-fd 3 --support /.ndtrace --ro PATH... --pyc-root PATH... [--own-pidns]
            [--drop-uid UID --drop-gid GID] [--cgroup-fd N...] [--tmp-bytes N] [--shm-bytes N]

The -c program (sandbox.tracerBootstrap) joins the parts in the fixed order of sandbox.tracerFiles
and compiles them as ONE module under the name -c gives, "<string>": common.py (this docstring,
the imports, constants and value helpers), ctracer.py (the item's C tracer: configuration, audit
hook), item.py (the item's processes, isolation, request, a function call, a generate run's
plumbing), replay.py (the replay driver), testrun.py (test runs and runner options), runners.py
(pytest and unittest in the item), generate.py (the input generator of generate runs: also runs
standalone, its top-level names all start with _gen), zygote.py (the zygote: control socket,
supervision, main).  One module, as when this
was one file: every function's code is nested in the one module code at the bottom of the stack
(what _tracer_codes trusts), all share one globals dict, and no part is a module that traced code
could import by name.  A part's top-level statements use only names of the parts before it.

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
