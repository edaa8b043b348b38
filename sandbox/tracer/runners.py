# The sandbox's tracer, part 6 of 8: pytest and unittest inside the item, the module a failed
# import misses, and the import paths (the zygote's pytest preload included). Not a module of its
# own: the zygote's -c program compiles the 8 parts as one module, in the order of
# sandbox.tracerFiles (common.py says how).


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
        # Files of the checkout an earlier collection ended tampered in (issue 29): left out.
        args = ["--collect-only", "-qq"] + common + ["--ignore=" + p for p in req.get("ignore") or []]
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
        ignored = frozenset(req.get("ignore") or [])
        if ignored:
            # Files of the checkout an earlier collection ended tampered in (issue 29): never
            # imported (a package folder: nothing below it).
            class _Loader(unittest.TestLoader):
                def _find_test_path(self, full_path, pattern):
                    if os.path.abspath(full_path) in ignored:
                        return None, False
                    return super()._find_test_path(full_path, pattern)
            loader = _Loader()
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
        if not _loadable_by_name(req["test"]):
            # A test that discovery alone makes (a load_tests protocol's doctest.DocTestSuite,
            # whose ids name the documented function): made again as the collection made it.
            suite = _discovered(loader, d, req["test"])
        elif phase_fn is not None:
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


def _loadable_by_name(name):
    """Whether unittest's loadTestsFromName(name) gives the test of that id: name leads to a
    module, a TestCase class or a method of one.  A doctest's id (doctest.DocTestSuite, added by a
    module's load_tests) names the documented function instead, which loadTestsFromName would
    call with no argument."""
    import importlib
    import importlib.util
    import unittest
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        try:
            spec = importlib.util.find_spec(".".join(parts[:i]))
        except Exception:
            spec = None
        if spec is None:
            continue
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except Exception:
            return True          # loadTestsFromName reports the failure, as before
        parent = None
        for p in parts[i:]:
            try:
                parent, obj = obj, getattr(obj, p)
            except Exception:
                return True
        return (isinstance(obj, types.ModuleType)
                or (isinstance(obj, type) and issubclass(obj, unittest.TestCase))
                or (isinstance(parent, type) and issubclass(parent, unittest.TestCase)))
    return True


def _discovered(loader, d, name):
    """The tests of id name that unittest discovery of d makes (as the collection did)."""
    import unittest
    found = []

    def walk(s):
        for t in s:
            if isinstance(t, unittest.TestSuite):
                walk(t)
            elif t.id() == name:
                found.append(t)
    walk(loader.discover(d, top_level_dir=d))
    if not found:
        raise LookupError("no test of id %r found by discovery" % (name,))
    return unittest.TestSuite(found[:1])


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
    forked, so items do not pay for it; before the first generate item, the generator's modules
    instead (doctest, inspect, typing and hypothesis.strategies: ~100 ms an item otherwise).  Only code under
    the interpreter's prefix runs here: the zygote's sys.path holds neither the repository nor any
    PythonPath entry.  What is preloaded stays in every later item of the zygote, whatever its
    kind (a repository or PythonPath entry with a copy of its own purges it: _purge_preloaded), so
    a sandbox that generates is best kept for generating (execute gives it one of its own)."""
    if req["kind"] == "generate":
        # The engine's own (generate.py, _gen_Lazy) and Hypothesis: 60-70 ms an item otherwise.
        which, modules = "gen", ("doctest", "inspect", "typing", "hypothesis.strategies")
    elif req["kind"] in ("call", "replay") or req["runner"] == "unittest":
        return
    else:
        which, modules = "tops", ("unittest", "pytest")
    if _PRELOADED[which] is not None:
        return
    before = set(sys.modules)
    tops = set()
    try:
        for name in modules:
            importlib.import_module(name)
    except BaseException:
        for name in set(sys.modules) - before:
            sys.modules.pop(name, None)
    else:
        for name in set(sys.modules) - before:
            f = getattr(sys.modules.get(name), "__file__", None)
            if type(f) is str and "-packages/" in f:
                tops.add(name.split(".")[0])
    _PRELOADED[which] = frozenset(tops)
    gc.collect()
    gc.freeze()
    _N.trim_heap()


def _purge_preloaded(d, pythonpath):
    """Item child: forget the preloaded pytest (and its dependencies) when the repository or a
    PythonPath entry has its own copy of any of them, so that copy is the one imported."""
    _purge_preloaded_in([d, os.path.join(d, "src")], pythonpath)


def _purge_preloaded_in(bases, pythonpath):
    """Item child: forget the preloaded modules (pytest's, hypothesis's and their dependencies)
    when a folder of bases or of pythonpath has its own copy of any of them."""
    tops = (_PRELOADED["tops"] or frozenset()) | (_PRELOADED["gen"] or frozenset())
    if not tops:
        return
    bases = list(bases) + list(pythonpath)
    if any(os.path.exists(os.path.join(b, t)) or os.path.exists(os.path.join(b, t + ".py"))
           for b in bases for t in tops):
        for name in list(sys.modules):
            if name.split(".")[0] in tops:
                del sys.modules[name]
