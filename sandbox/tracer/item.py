# The sandbox's tracer, part 3 of 8: the item's processes (keeper, init, item), their isolation,
# the request, a function call and the plumbing of a generate run. Not a module of its own: the
# zygote's -c program compiles the 8 parts as one module, in the order of sandbox.tracerFiles
# (common.py says how).


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


def _report_setup_failure(fd, what, exc):
    """Best effort: the reason an item could not be set up, on its stderr pipe: fd, the item's
    fds[3] in its keeper and init (fds are the request, events, stdout and stderr pipes), 2 in
    the item."""
    try:
        os.write(fd, ("ndtrace: %s failed: %r\n" % (what, exc)).encode("utf-8", "replace"))
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
        for fd in opts.cgroup_fd:
            # The item group's cgroup.procs, opened by Go (cgroup v2: one; v1: one per
            # hierarchy): "0" moves this process, and so everything it forks, into the group.
            # It carries the worker's right to move processes: no process of the item keeps it.
            os.write(fd, b"0")
            os.close(fd)
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
        _report_setup_failure(fds[3], "item namespaces", e)
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
            if "no-proc" in opts.simulate:
                raise PermissionError("simulated: a runtime that masks /proc")
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
                _report_setup_failure(fds[3], "writable view of the checkout (read-only instead)", e)
        if have_proc:
            _N.mount("/proc/sys", "/proc/sys", None, MS_BIND | MS_REC, None)
            _N.mount(None, "/proc/sys", None, MS_BIND | MS_REMOUNT | MS_RDONLY | flags, None)
        to_item, from_init = os.pipe2(os.O_CLOEXEC)
        to_init, from_item = os.pipe2(os.O_CLOEXEC)
    except BaseException as e:
        _report_setup_failure(fds[3], "item mounts", e)
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
    os.close(to_item)
    os.close(from_item)
    failed = False
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
        # (the item's pipes are still open: the reason reaches its stderr)
        _report_setup_failure(fds[3], "item user namespace", e)
        os.kill(pid, signal.SIGKILL)
        failed = True
    _close_all(fds)
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
            status = (EXIT_SETUP << 8) if failed else st   # the SIGKILL was ours, not the item's end
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
        _report_setup_failure(2, "item isolation", e)
        os._exit(EXIT_SETUP)
    req = _prepare(hdr, opts)
    try:
        if req["kind"] == "call":
            _run_call(req)
        elif req["kind"] == "generate":
            _run_generate(req)
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
        if req["clock"]:
            # A frozen clock (TestRequest.Clock): C callables only, so that no frame of the
            # tracer's is ever on the stack of the item's calls (common.py, the trust model).
            time.time = functools.partial(float, req["clock"])
            time.time_ns = functools.partial(int, req["clock"] * 1000000000)
        function_item = (req["kind"] in ("call", "generate")
                         or (req["kind"] == "replay" and not req["dir"]))
        if function_item:
            os.chdir("/tmp")
        if req["kind"] == "replay":
            # No C tracer: the replay driver seals its own stream (docs/tracer-protocol.md).
            req["key"] = key
        elif req["kind"] == "generate":
            # No C tracer and no audit hook: a generate run traces nothing and writes proposals
            # only, which Go checks and every kept input is traced again as its own item
            # (docs/sandbox.md, "Generating inputs"). The key is not needed: nothing is sealed.
            pass
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
        if req["kind"] in ("call", "generate") and req["module"]:
            # A function where it lives: the checkout and its import roots first, as in a test run.
            if req["kind"] == "generate":
                _purge_preloaded_in(req["paths"], req["pythonpath"])
            _extend_path(None, req["pythonpath"], req["paths"])
        elif req["kind"] in ("call", "generate") and req["pythonpath"]:
            if req["kind"] == "generate":
                _purge_preloaded_in((), req["pythonpath"])
            _extend_path(None, req["pythonpath"])
    except BaseException as e:
        _report_setup_failure(2, "item request", e)
        os._exit(EXIT_SETUP)
    return req


# The module body of a function item run where it lives (Request.Module): its module imported,
# which must be the file traced, and its names made the call's.
_MODULE_BOOT = "<ndtrace-module>"
_MODULE_IMPORT = """\
__ndtrace_module = __import__("importlib").import_module(%r)
if getattr(__ndtrace_module, "__file__", None) != %r:
    raise ImportError("module %%s is %%r, not the file traced"
                      %% (__ndtrace_module.__name__, getattr(__ndtrace_module, "__file__", None)))
globals().update(vars(__ndtrace_module))
del __ndtrace_module
"""


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
    # namespace, and `import __main__` does not reach the tracer's globals.
    module = types.ModuleType("__main__")
    namespace = module.__dict__
    namespace["__builtins__"] = builtins
    sys.modules["__main__"] = module
    # (.get: a request the traced code built and passed in again lacks "module", and must still
    # reach the tracer, which finds its entry point used: replay_bottom_code.)
    if req.get("module"):
        # A function where it lives: its module imported as part of its package (untraced, as a
        # module body is), and the call evaluated among the module's names. Only the module's
        # file is traced, its code objects checked against the file as a test run's are; the
        # code run as the module body here is this import, under a name of its own.
        namespace = {"__builtins__": builtins}
        code = compile(_MODULE_IMPORT % (req["module"], req["filename"]), _MODULE_BOOT, "exec",
                       dont_inherit=True)
    own = _code_objects([code])     # the only code objects of this file that may be traced
    entry = _code_objects([call])   # depth-0 frames are called from these
    del tree, blocks, lines, module
    N.tracer_call(code, call, namespace, record, own, entry)    # never returns


# --------------------------------------------------------------------------------------------
# A generate run (kind "generate")
# --------------------------------------------------------------------------------------------
#
# The item finds the functions of one module, or generates inputs for one of them, with the
# generator of generate.py (_gen_main), and writes what it returns to Go on the events pipe: the
# line _PROPOSALS_START before any of the item's code runs, then the result as one JSON line, and
# nothing else.  The result is the item's code's to forge (it runs in this process): Go checks and
# caps all of it, and every input kept is traced again, for real, as its own item.

_PROPOSALS_START = b'{"generate":"start"}\n'
_PROPOSALS_MAX = 4 << 20       # the most bytes of a result line (Go's cap: sandbox.maxGenResult)


def _proposals_encoder():
    """A JSON encoder of the generator's result (str keys; dict, list, str, int, float, bool,
    None; at most 8 levels and _PROPOSALS_MAX bytes) made of what the interpreter had before any
    item code ran: an item whose module replaces json, builtins or str's methods does not change
    how the result is written (it can still forge what the result says)."""
    _type, _dict, _list, _tuple, _str, _int, _float, _bool = type, dict, list, tuple, str, int, float, bool
    _len, _enumerate, _isfinite = len, enumerate, math.isfinite
    int_repr, float_repr, enc, join = int.__repr__, float.__repr__, _enc, "".join
    none = type(None)

    class TooLarge(Exception):
        pass

    def encode(obj, limit=_PROPOSALS_MAX):
        parts, size = [], [0]

        def put(s):
            size[0] += _len(s)
            if size[0] > limit:
                raise TooLarge
            parts.append(s)

        def walk(x, depth):
            t = _type(x)
            if depth > 8:
                raise ValueError("nested too deep")
            if t is _str:
                put(enc(x))
            elif t is _bool:
                put("true" if x else "false")
            elif t is _int:
                put(int_repr(x))
            elif t is _float:
                if not _isfinite(x):
                    raise ValueError("a float that is not finite")
                put(float_repr(x))
            elif t is none:
                put("null")
            elif t is _list or t is _tuple:
                put("[")
                for i, v in _enumerate(x):
                    if i:
                        put(",")
                    walk(v, depth + 1)
                put("]")
            elif t is _dict:
                put("{")
                first = True
                for k, v in x.items():
                    if _type(k) is not _str:
                        raise ValueError("a key that is not a string")
                    if not first:
                        put(",")
                    first = False
                    put(enc(k))
                    put(":")
                    walk(v, depth + 1)
                put("}")
            else:
                raise ValueError("a value of type %s" % _qualname(t))

        walk(obj, 0)
        return join(parts).encode("ascii")

    return encode, TooLarge


_proposals_encode, _ProposalsTooLarge = _proposals_encoder()
_proposals_write, _proposals_exit = os.write, os._exit


def _proposals_send(data):
    """Write data whole on the events pipe, or leave: the item's code closed it."""
    try:
        while data:
            n = _proposals_write(EVENTS_FD, data)
            data = data[n:]
    except BaseException:
        _proposals_exit(EXIT_PIPE)


def _proposals_failure(status, what, e):
    """The result of a generator that raised e (its type and message, bounded)."""
    try:
        msg = str(e)[:500]
    except BaseException:
        msg = ""
    return {"status": status, "detail": "%s: %s: %s" % (what, _qualname(type(e)), msg)}


def _run_generate(req):
    """Body of a generate item (never returns): _gen_main with the request and a load_module()
    that imports the module where it lives (or runs the standalone code as a fresh __main__,
    as _run_call would), then the result on the events pipe, and exit.  No C tracer, no audit
    hook (the generator may use sys.settrace); the item's isolation is a call item's."""
    flushes = tuple(s.flush for s in (sys.__stdout__, sys.__stderr__) if s is not None)
    gen_req = {"function": req["function"], "code": req["code"], "filename": req["filename"],
               "per_function": req["per_function"], "attempts": req["attempts"],
               "seeds": list(req["seeds"]), "seed": req["seed"], "budget_s": req["budget_s"]}
    loaded = []

    def load_module():
        if loaded:
            return loaded[0]
        if req["module"]:
            # Where it lives: imported as part of its package (the checkout and its roots are
            # first on sys.path), and it must be the file the request names.
            mod = importlib.import_module(req["module"])
            if getattr(mod, "__file__", None) != req["filename"]:
                raise ImportError("module %s is %r, not the file asked for"
                                  % (req["module"], getattr(mod, "__file__", None)))
        else:
            # Standalone: as a function item's module body (_run_call): a fresh __main__.
            code = compile(req["code"], req["filename"], "exec", dont_inherit=True)
            lines = [line + "\n" for line in _NEWLINE_RE.split(req["code"])]
            linecache.cache[req["filename"]] = (len(req["code"]), None, lines, req["filename"])
            mod = types.ModuleType("__main__")
            mod.__dict__["__builtins__"] = builtins
            sys.modules["__main__"] = mod
            exec(code, mod.__dict__)
        loaded.append(mod)
        return mod

    try:
        _proposals_send(_PROPOSALS_START)
        try:
            result = _gen_main(gen_req, load_module)
        except MemoryError:
            result = {"status": "memory", "detail": "MemoryError"}
        except BaseException as e:
            result = _proposals_failure("invalid", "the generator failed", e)
        try:
            data = _proposals_encode(result)
        except _ProposalsTooLarge:
            data = _proposals_encode({"status": "invalid", "detail": "the generator's result is "
                                     "larger than %d bytes" % _PROPOSALS_MAX})
        except MemoryError:
            raise
        except BaseException as e:
            data = _proposals_encode(_proposals_failure("invalid", "the generator's result is not "
                                                      "JSON", e))
        for flush in flushes:
            try:
                flush()
            except BaseException:
                pass
        _proposals_send(data + b"\n")
    except MemoryError:
        _proposals_exit(EXIT_NOMEM)
    _proposals_exit(0)
