# The sandbox's tracer, part 8 of 8: the zygote: the control socket, the supervision of each item,
# main(). Not a module of its own: the zygote's -c program compiles the 8 parts as one module, in
# the order of sandbox.tracerFiles (common.py says how).


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
    if kind not in ("call", "collect", "test", "replay", "generate"):
        raise ProtocolError("run: unknown kind %r" % (kind,))
    if msg.get("runner", "") not in ("", "pytest", "unittest"):
        raise ProtocolError("run: unknown runner %r" % (msg.get("runner"),))
    writable, writable_bytes = msg.get("writable", ""), msg.get("writable_bytes", 0)
    if type(writable) is not str or type(writable_bytes) is not int or writable_bytes < 0:
        raise ProtocolError("run: writable must be a path and writable_bytes a count")
    if writable and (kind in ("call", "generate") or not writable.startswith("/")
                     or os.path.normpath(writable) != writable or writable == "/"):
        raise ProtocolError("run: writable must be a clean absolute path, for test runs (and their "
                            "replays) only")
    return {"id": msg["id"], "kind": kind, "runner": msg.get("runner", ""),
            "limits": _check_limits(msg.get("limits", {})),
            "writable": writable, "writable_bytes": writable_bytes}


_MODULE_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")


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
    gen = None
    if kind == "generate":
        need("code", str)
        need("filename", str)
        gen = _validate_generate(msg)
    elif kind in ("call", "replay"):
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
    for key in ("exclude", "pythonpath", "paths", "ignore"):
        v = msg.get(key) or []
        if type(v) is not list or not all(type(t) is str and t.startswith("/") for t in v):
            raise ProtocolError("run: %s must be a list of absolute paths" % key)
    if type(msg.get("seed", 0)) not in (int, str, float, type(None)):
        raise ProtocolError("run: bad seed")
    clock = msg.get("clock", 0)
    if type(clock) is not int or not 0 <= clock < 1 << 40:
        raise ProtocolError("run: clock must be a non-negative integer")
    if type(msg.get("naive", False)) is not bool:
        raise ProtocolError("run: naive must be a boolean")
    if msg.get("options", "") not in ("", "original", "none"):
        raise ProtocolError("run: options must be \"\", \"original\" or \"none\"")
    module = msg.get("module", "")
    if module and (kind not in ("call", "replay", "generate") or entry is not None or type(module) is not str
                   or not _MODULE_NAME_RE.match(module) or not msg.get("paths")
                   or not msg["filename"].startswith(msg["paths"][0].rstrip("/") + "/")):
        raise ProtocolError("run: module must be a dotted name, with paths (the checkout first) "
                            "holding its file")
    out = {"id": hdr["id"], "kind": kind, "code": msg.get("code", ""),
            "filename": msg.get("filename", ""), "call": msg.get("call", ""),
            "targets": targets, "seed": msg.get("seed", 0), "clock": clock,
            "naive": msg.get("naive", False), "limits": hdr["limits"],
            "dir": msg.get("dir", ""), "runner": hdr["runner"],
            "test": msg.get("test", ""), "traced": msg.get("traced", False),
            "exclude": msg.get("exclude") or [], "pythonpath": msg.get("pythonpath") or [],
            "options": msg.get("options", ""), "paths": msg.get("paths") or [],
            "ignore": msg.get("ignore") or [],
            "wrapper": msg.get("wrapper", ""), "actions": msg.get("actions") or [], "entry": entry,
            "module": module}
    if gen is not None:
        out.update(gen)
    return out


# Bounds of a generate request (sandbox.GenerateRequest; Go keeps within them).
_REQ_MAX_SEEDS, _REQ_MAX_SEED_CHARS = 64, 4096
_REQ_MAX_PER_FUNCTION, _REQ_MAX_ATTEMPTS = 64, 1000000


def _validate_generate(msg):
    """Check a generate request's own fields: the unit ("" for find, "name" or "Class.name"), K,
    the attempts, the seeds (argument-list texts), the budget in wall seconds."""
    function = msg.get("function", "")
    if type(function) is not str or (function and not (
            len(function) <= 512 and function.count(".") <= 1
            and all(p.isidentifier() for p in function.split(".")))):
        raise ProtocolError("run: function must be \"\", a name or Class.name")
    per_function, attempts = msg.get("per_function"), msg.get("attempts")
    if type(per_function) is not int or not 1 <= per_function <= _REQ_MAX_PER_FUNCTION:
        raise ProtocolError("run: per_function must be an integer in 1..%d" % _REQ_MAX_PER_FUNCTION)
    if type(attempts) is not int or not 1 <= attempts <= _REQ_MAX_ATTEMPTS:
        raise ProtocolError("run: attempts must be an integer in 1..%d" % _REQ_MAX_ATTEMPTS)
    seeds = msg.get("seeds") or []
    if (type(seeds) is not list or len(seeds) > _REQ_MAX_SEEDS
            or not all(type(x) is str and len(x) <= _REQ_MAX_SEED_CHARS for x in seeds)):
        raise ProtocolError("run: seeds must be at most %d strings of at most %d characters"
                            % (_REQ_MAX_SEEDS, _REQ_MAX_SEED_CHARS))
    budget = msg.get("budget_s")
    if type(budget) not in (int, float) or not 0 < budget < 1e6:
        raise ProtocolError("run: budget_s must be a positive number of seconds")
    return {"function": function, "per_function": per_function, "attempts": attempts,
            "seeds": list(seeds), "budget_s": float(budget)}


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


def _spawn(sock, fds, opts):
    """Fork the item's keeper, init and item with the native helper (spawn.c): the keeper and init
    run no Python (what _keeper and _item_init do, in C). Returns the keeper's pid in the zygote,
    and (to_item, from_item, ipc_limited) in the item."""
    drop = (-1, -1) if opts.drop_uid is None else (opts.drop_uid, opts.drop_gid)
    return _N.spawn_item(sock.fileno(), tuple(fds), tuple(opts.cgroup_fd), drop[0], drop[1],
                         opts.tmp_bytes, opts.shm_bytes, bool(opts.landlock),
                         "ro-sysctl" in opts.simulate, "no-proc" in opts.simulate)


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
        if hdr["writable"]:
            pid = os.fork()           # keeper and init in Python, which makes the writable view
        else:
            pid = _spawn(sock, fds, opts)   # keeper and init in C (native spawn.c)
    except OSError as e:
        _close_all(fds)
        return not send(sock, {"op": "error", "message": "fork failed: %s" % (e,),
                               "id": hdr["id"]})
    if type(pid) is tuple:            # the item, forked by the C init
        try:
            sock.detach()             # (the keeper closed it)
            opts.sync, opts.ipc_limited, opts.rw, opts.rw_mode = pid[:2], pid[2], [], ""
            _item(hdr, fds, opts)
        finally:
            os._exit(EXIT_SETUP)
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


# The zygote's options, as Go's zygote.go and bwrap.go pass them: "--name VALUE", and --own-pidns
# alone. A parser of our own: argparse's import alone would add 1.3 MB to the zygote, which every
# item's fork copies the page-table entries of and every exit tears down (docs/sandbox.md, "What an
# item costs"). name: (type, repeated, default).
_OPTIONS = {
    "ctrl_fd": (int, False, None), "drop_uid": (int, False, None), "drop_gid": (int, False, None),
    "support": (str, False, "/.ndtrace"), "ro": (str, True, None), "pyc_root": (str, True, None),
    "ext_root": (str, True, None),
    "cgroup_fd": (int, True, None),         # the item group's cgroup.procs
    "tmp_bytes": (int, False, 64 << 20), "shm_bytes": (int, False, 16 << 20),
    "unsandboxed_item": (str, False, None),  # tests: see unsandboxed_item
    "native": (str, False, None),
    "simulate": (str, True, None),           # tests: no-landlock, ro-sysctl, no-overlay, no-proc
}


def _usage_error(message):
    sys.stderr.write("ndtrace-zygote: error: %s\n" % message)
    raise SystemExit(2)


def parse_args(argv):
    opts = types.SimpleNamespace(own_pidns=False)
    for name, (_, many, default) in _OPTIONS.items():
        setattr(opts, name, [] if many else default)
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--own-pidns":
            opts.own_pidns = True
            continue
        name = arg[2:].replace("-", "_") if arg.startswith("--") else ""
        if name not in _OPTIONS:
            _usage_error("unrecognized argument: %s" % arg)
        if i >= len(argv):
            _usage_error("argument %s: expected one argument" % arg)
        kind, many, _ = _OPTIONS[name]
        try:
            value = kind(argv[i])
        except ValueError:
            _usage_error("argument %s: invalid %s value: %r" % (arg, kind.__name__, argv[i]))
        i += 1
        if many:
            getattr(opts, name).append(value)
        else:
            setattr(opts, name, value)
    if opts.unsandboxed_item is not None:
        if not opts.native:
            _usage_error("--unsandboxed-item needs --native PATH")
        return opts
    if opts.ctrl_fd is None:
        _usage_error("--ctrl-fd is required")
    if (opts.drop_uid is None) != (opts.drop_gid is None):
        _usage_error("--drop-uid and --drop-gid go together")
    # Defence in depth: kill(-1) outside a private PID namespace would hit the whole host. In
    # one, the zygote is PID 1 (namespaces backend) or 2 (bubblewrap's init is PID 1).
    if opts.own_pidns and os.getpid() > 2:
        _usage_error("--own-pidns given, but this process (pid %d) is not at the top of a fresh "
                     "PID namespace" % os.getpid())
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
    """Every code object of the tracer (its files, compiled as one module): the module's code
    and everything nested in it, with the one-line -c program that compiled it
    (sandbox.tracerBootstrap): the module-level frames at the bottom of every process started
    from the tracer.  The zygote computes it once and hands it to the native helper
    (trust_codes: C memory every item inherits), never keeps it in a global: a list of the
    tracer's code objects is exactly what traced code must not find."""
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
        _N.trust_codes(_tracer_codes(), _import_codes())
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
        _N.trust_codes(_tracer_codes(), _import_codes())   # once, for every item
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
    # Work every item would otherwise repeat, done once here (docs/sandbox.md, "What an item
    # costs"): OpenSSL looks up its HMAC and SHA-256 implementations on first use (the seal).
    _hmac_digest(b"\0" * 32, b"", "sha256")
    gc.collect()
    gc.freeze()                   # fewer copy-on-write faults in the forked children
    _N.trim_heap()                # the compiler's freed memory: no fork copies or tears it down
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
